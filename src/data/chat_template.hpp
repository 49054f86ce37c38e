// Supervised fine-tuning records (data/json_record.hpp) rendered into token ids and a per-token loss
// mask (1: the loss trains on predicting this token). Text is encoded in runs of the same mask value
// (the prompt and the answer apart, as NeMo's SFT datasets encode context and answer); special tokens
// come by id, never from text. The templates put the runs' edges at pre-tokenisation boundaries (of
// Llama 3's pattern for llama3, Qwen's for chatml and qwen3, GPT-2's for plain, an added token "\n" for
// gemma), so that a conversation tokenises as its rendered text would as a whole; a run that follows
// text with nothing between is encoded as a continuation (no Llama 2-style "▁" prefix: mistral).
//
//   llama3  Meta Llama 3 Instruct's template (its tokenizer_config.json chat_template):
//             <|begin_of_text|> then per message
//             <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>   (CONTENT | trim)
//           trained: each assistant message's CONTENT and its <|eot_id|>.
//   chatml  ChatML (Qwen2.5's template without its default system message, and other ChatML models):
//             per message <|im_start|>ROLE\nCONTENT<|im_end|>\n   (roles system, user, assistant)
//           trained: each assistant message's CONTENT and its <|im_end|>, not the "\n" after it.
//   qwen3   Qwen3's template (its tokenizer_config.json chat_template, without tools): chatml, except
//           that an assistant CONTENT holding "</think>" is its reasoning (after "<think>", "\n"
//           stripped) then its answer (after "</think>", leading "\n" stripped), earlier assistant
//           messages keep only the answer, and the conversation's last message, if an assistant's, is
//             <|im_start|>assistant\n<think>\nREASONING\n</think>\n\nANSWER<|im_end|>\n
//           (REASONING empty without one); trained: from <think> to <|im_end|>.
//   gemma   Gemma 3's template (its tokenizer_config.json chat_template, text only):
//             <bos> then per message <start_of_turn>ROLE\nCONTENT<end_of_turn>\n   (CONTENT | trim; ROLE
//           user, or model for an assistant); a first system message's content + "\n\n" opens the first
//           user message; trained: each answer's CONTENT and its <end_of_turn>.
//   mistral Mistral 7B Instruct v0.1's and Mixtral 8x7B Instruct v0.1's template (tokenizer V1, "[INST]"
//           as text): <s> then per user message "[INST] CONTENT [/INST]", per answer CONTENT</s>; a first
//           system message joins the first user message as "SYSTEM\n\nUSER" (mistral-common's way); roles
//           alternate user, assistant; trained: each answer and its </s>. Tokenizers with [INST] as a
//           token (V2, V3, Tekken) are refused: their spacing differs and is not rendered yet.
//   plain   for tokenizers without chat tokens (GPT-2, a byte tokenizer):
//             per message "Role:\nCONTENT\n\n" (Role capitalised: System, User, Assistant, ...),
//             except that an assistant message's closing "\n\n" is the end-of-document token when it is
//             the last message and the tokenizer has one; trained: assistant CONTENT and what closes it
//             (the end-of-document token, or the first "\n" of "\n\n").
// Prompt/completion pairs take no template: prompt then completion, the completion trained.
// Every record ends with the tokenizer's end-of-document token (untrained unless it closes an
// assistant message, as above), which packing and data.reset_attention_mask take as the boundary.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/json_record.hpp"
#include "tokenizer/tokenizer.hpp"

namespace dtrain {

enum class ChatTemplate { llama3, chatml, qwen3, gemma, mistral, plain };

struct MaskedTokens {
  std::vector<std::uint32_t> tokens;
  std::vector<std::uint8_t> mask;  // one per token: 1 = a target the loss trains on
};

// "auto" (the first of qwen3, chatml, llama3 and gemma whose special tokens the tokenizer has, else plain), or
// a template's name; UserError for another name or a template whose special tokens the tokenizer lacks
// (naming them).
ChatTemplate chat_template_for(const std::string& name, const Tokenizer& tokenizer);
const char* chat_template_name(ChatTemplate t);

class ChatRenderer {
 public:
  ChatRenderer(ChatTemplate t, const Tokenizer& tokenizer);
  // The record's tokens and mask, encoded by `tokenizer` (the same files as the constructor's: a
  // worker's copy).
  MaskedTokens render(const SftRecord& record, Tokenizer& tokenizer) const;
  ChatTemplate chat_template() const { return t_; }

 private:
  ChatTemplate t_;
  std::optional<std::uint32_t> eod_;
  std::uint32_t bos_ = 0, start_header_ = 0, end_header_ = 0, eot_ = 0;  // llama3
  std::uint32_t im_start_ = 0, im_end_ = 0, think_ = 0, end_think_ = 0;  // chatml, qwen3
  std::uint32_t start_turn_ = 0, end_turn_ = 0;                           // gemma (and bos_)
  std::uint32_t eos_ = 0;                                                 // mistral (and bos_)
};

// Python's str.strip(): leading and trailing Unicode whitespace removed (Jinja's trim filter).
std::string trim_whitespace(const std::string& s);

}  // namespace dtrain
