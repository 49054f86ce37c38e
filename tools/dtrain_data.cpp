// dtrain-data: turns corpora into the token files dtrain trains on (PREFIX.train.bin and
// PREFIX.val.bin, data.path = PREFIX), or into Megatron indexed datasets (PREFIX.bin + PREFIX.idx,
// data.format = megatron): text files (a document per paragraph) or JSON Lines (plain, .gz, .zst; a
// document per line and --json-keys key, or with --sft a fine-tuning record per line with its loss
// mask), tokenised by --workers threads with any tokenizer (optionally a SentencePiece model trained
// first). A plain tool: it links dtrain_core but never starts MPI. Nothing is published unless
// everything was written: outputs go to temporaries, renamed together at the end.
#include <boost/program_options.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/staged_file.hpp"
#include "config/choices.hpp"
#include "config/cli.hpp"
#include "config/tokenizer_spec.hpp"
#include "data/corpus_ingest.hpp"
#include "data/loss_mask_file.hpp"
#include "data/megatron_dataset.hpp"
#include "data/megatron_writer.hpp"
#include "data/token_file.hpp"
#include "runtime/machine.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace po = boost::program_options;
using dtrain::UserError;

namespace {

struct Args {
  std::string out;
  double val_fraction = 0.1;
  std::string tokenizer = "byte";
  std::string train_tokenizer;  // as given: "sentencepiece" or empty
  bool train_sentencepiece = false;  // parsed from it
  int vocab_size = 0;
  std::string format_word = "dtrain";  // as given
  dtrain::DataFormat format = dtrain::DataFormat::dtrain;  // parsed from it
  std::vector<std::string> inputs;
  std::vector<std::string> json_keys{"text"};
  bool append_eod = false, skip_bad_lines = false, sft = false, truncate = false;
  std::string chat_template = "auto";
  int workers = 0;  // 0: every core
  long long seq_length = 0;
  bool help = false;
};

po::options_description visible_options(Args& a) {
  po::options_description d("Options");
  d.add_options()
      ("help,h", po::bool_switch(&a.help), "print this help and exit")
      ("out,o", po::value(&a.out)->value_name("PREFIX"),
       "output prefix: writes PREFIX.train.bin and PREFIX.val.bin, or PREFIX.bin and PREFIX.idx with --format "
       "megatron (directories are created); JSON Lines with --json-keys give one output per key, named "
       "PREFIX_KEY_document as Megatron's preprocess_data.py names them")
      ("val-fraction", po::value(&a.val_fraction)->value_name("F")->default_value(0.1, "0.1"),
       "fraction of the tokens, taken from the end of the input, that goes to the val file; 0 < F < 1")
      ("tokenizer", po::value(&a.tokenizer)->value_name("NAME")->default_value("byte"),
       "byte: each byte of the text is one token (vocabulary 256); gpt2: GPT-2's BPE (vocabulary 50257) from "
       "data/tokenizers/gpt2 (tools/fetch-data fetches it), gpt2:DIR from DIR/encoder.json and DIR/vocab.bpe; "
       "hf:DIR: a Hugging Face tokenizer.json (GPT-2's or Llama 3's scheme); sentencepiece:MODEL_FILE: a SentencePiece model")
      ("train-tokenizer", po::value(&a.train_tokenizer)->value_name("sentencepiece"),
       "first train a SentencePiece model of --vocab-size pieces on the text (lossless: no normalisation, "
       "whitespace kept, byte fallback) and write it to PREFIX.model (and PREFIX.vocab), then tokenise with it; "
       "train on the files with data.tokenizer=sentencepiece:PREFIX.model (text inputs only)")
      ("vocab-size", po::value(&a.vocab_size)->value_name("N"), "vocabulary size of --train-tokenizer (e.g. 2000)")
      ("format", po::value(&a.format_word)->value_name("FORMAT")->default_value("dtrain"),
       "dtrain: PREFIX.train.bin + PREFIX.val.bin; megatron: one Megatron-LM indexed dataset PREFIX.bin + "
       "PREFIX.idx (uint16 tokens below a vocabulary of 65500, else int32), one sequence per document, no val "
       "split (dtrain cuts it by data.split). Megatron's layout has no place for the tokenizer: dtrain checks the ids "
       "against model.vocab_size but cannot tell which tokenizer made them, so train with the same one "
       "(data.tokenizer)")
      ("json-keys", po::value(&a.json_keys)->multitoken()->value_name("KEY ...")->default_value({"text"}, "text"),
       "JSON Lines input (.jsonl or .json, optionally .gz, .zst, .xz or .bz2): the keys whose string values are the "
       "documents, one output each (Megatron's --json-keys); the option takes every word after it, so give the input files "
       "first or end the keys with --")
      ("append-eod", po::bool_switch(&a.append_eod),
       "end every document with the tokenizer's end-of-document token (<|endoftext|>, <|end_of_text|>, </s>), as "
       "Megatron's --append-eod; data.reset_attention_mask, reset_position_ids and eod_mask_loss find documents by it")
      ("sft", po::bool_switch(&a.sft),
       "supervised fine-tuning data: JSON Lines of {\"messages\": [{\"role\", \"content\"}, ...]} (rendered by "
       "--chat-template) or {\"prompt\", \"completion\"} / {\"input\", \"output\"} pairs (prompt then completion, no "
       "template); writes a loss mask beside the tokens (PREFIX.train.lossmask.bin, or the Megatron dataset "
       "PREFIX.lossmask) that trains only on assistant messages and completions; every record ends with the "
       "end-of-document token")
      ("chat-template", po::value(&a.chat_template)->value_name("NAME")->default_value("auto"),
       "--sft: qwen3 (Qwen3's template: ChatML with its <think> block on the last answer), chatml (<|im_start|>ROLE\\n"
       "...<|im_end|>: Qwen2.5 and other ChatML models), llama3 (Meta Llama 3 Instruct's template, with the tokenizer's "
       "<|start_header_id|>, <|end_header_id|>, <|eot_id|>, <|begin_of_text|>), gemma (Gemma 3's <start_of_turn>ROLE\\n"
       "...<end_of_turn>), mistral (Mistral 7B Instruct v0.1's <s>[INST] ... [/INST]...</s>), plain (\"User:\\n...\\n\\nAssistant:\\n...\", "
       "any tokenizer), or auto (the first of qwen3, chatml, llama3, gemma whose special tokens the tokenizer has, else plain)")
      ("seq-length", po::value(&a.seq_length)->value_name("N"),
       "--sft: the model.seq_length you will train at; a record of more than N + 1 tokens (one sample's window) "
       "is an error, or with --truncate cut to N + 1")
      ("truncate", po::bool_switch(&a.truncate), "--sft with --seq-length: cut over-long records instead of refusing them")
      ("skip-bad-lines", po::bool_switch(&a.skip_bad_lines),
       "JSON Lines: skip a line that is not a valid record (counted and reported, the first named) instead of stopping")
      ("workers", po::value(&a.workers)->value_name("N"),
       "tokenizer threads (default: every core this process may use); the output is the same bytes whatever N");
  return d;
}

void print_usage(const po::options_description& visible) {
  std::cout << "Usage: dtrain-data --out PREFIX [--tokenizer NAME] [--format dtrain|megatron] [--workers N] INPUT.txt|INPUT.jsonl[.gz|.zst|.xz|.bz2] ...\n"
               "       dtrain-data --out PREFIX [--append-eod] [--skip-bad-lines] INPUT.jsonl ... --json-keys KEY [KEY ...]\n"
               "       dtrain-data --out PREFIX --sft [--chat-template auto|qwen3|chatml|llama3|gemma|mistral|plain] [--seq-length N [--truncate]] CHAT.jsonl ...\n"
               "       dtrain-data --out PREFIX --train-tokenizer sentencepiece --vocab-size N [--format dtrain|megatron] INPUT.txt ...\n"
               "Reads the inputs in order (text: a document per paragraph; JSON Lines: a document per line and key),\n"
               "tokenises the documents and writes them: with --format dtrain the first 1-F of the tokens to\n"
               "PREFIX.train.bin and the last F to PREFIX.val.bin (train with data.path=PREFIX); with --format\n"
               "megatron one document per sequence in PREFIX.bin + PREFIX.idx (train with data.format=megatron\n"
               "data.path=PREFIX; data.split cuts train and val). A Megatron dataset does not record its tokenizer,\n"
               "so train with the same data.tokenizer. --sft also writes the loss mask; dtrain uses it when present.\n"
               "A progress line shows on a terminal; a summary at the end.\n\n"
            << visible;
}

Args parse_args(int argc, char** argv) {
  Args a;
  po::options_description visible = visible_options(a);
  po::options_description all;
  all.add(visible).add_options()("input", po::value(&a.inputs));
  po::positional_options_description positional;
  positional.add("input", -1);
  const po::variables_map given = dtrain::parse_command_line_options(argc, argv, 1, all, positional, "dtrain-data");
  if (a.help) {
    print_usage(visible);
    return a;
  }
  if (a.out.empty()) throw UserError("missing --out PREFIX (e.g. --out data/mobydick); see dtrain-data --help");
  if (std::filesystem::path(a.out).filename().empty()) {
    throw UserError("--out '" + a.out + "' names a directory, not a prefix; give e.g. --out " + a.out + "corpus");
  }
  for (const std::string& key : a.json_keys) {
    std::error_code ec;
    // a path, not a word: a key that names a file and has a '/' or a '.' in it
    if (!given["json-keys"].defaulted() && key.find_first_of("/.") != std::string::npos && std::filesystem::exists(key, ec))
      throw UserError("--json-keys took '" + key + "', a file, as a key (the option takes every word after it); give the input "
                      "files before --json-keys, or end the keys with --");
  }
  if (a.inputs.empty()) throw UserError("no input files given; see dtrain-data --help");
  if (!(a.val_fraction > 0.0 && a.val_fraction < 1.0)) {
    std::ostringstream value;
    value << a.val_fraction;
    throw UserError("--val-fraction=" + value.str() + " is outside (0, 1); use e.g. 0.1");
  }
  dtrain::parse_tokenizer_spec(a.tokenizer);
  if (!a.train_tokenizer.empty()) {
    if (a.train_tokenizer != "sentencepiece") {
      throw UserError("unknown --train-tokenizer '" + a.train_tokenizer + "'; the trainable tokenizer is sentencepiece");
    }
    a.train_sentencepiece = true;
    if (a.vocab_size < 260 || a.vocab_size > 1000000) {
      throw UserError("--train-tokenizer needs --vocab-size N, 260 <= N <= 1000000 (SentencePiece's 256 byte pieces "
                      "and its specials come first); e.g. --vocab-size 2000");
    }
    if (!given["tokenizer"].defaulted()) throw UserError("give --tokenizer or --train-tokenizer, not both");
    for (const std::string& in : a.inputs)
      if (dtrain::input_kind(in) == dtrain::InputKind::json)
        throw UserError("--train-tokenizer trains on text files; '" + in + "' is JSON Lines");
  } else if (a.vocab_size != 0) {
    throw UserError("--vocab-size applies to --train-tokenizer; the vocabulary of --tokenizer is its own");
  }
  if (a.format_word == "megatron")
    a.format = dtrain::DataFormat::megatron;
  else if (a.format_word != "dtrain")
    throw UserError("unknown --format '" + a.format_word + "'; the formats are: dtrain, megatron");
  if (a.format == dtrain::DataFormat::megatron && !given["val-fraction"].defaulted()) {
    throw UserError("--val-fraction applies to --format dtrain; dtrain splits a Megatron dataset by data.split");
  }
  if (a.json_keys.empty()) throw UserError("--json-keys needs at least one key (e.g. --json-keys text)");
  if (!given["json-keys"].defaulted())
    for (const std::string& in : a.inputs)
      if (dtrain::input_kind(in) != dtrain::InputKind::json)
        throw UserError("--json-keys applies to JSON Lines inputs (.jsonl, .json), but '" + in + "' is read as text");
  for (std::size_t i = 0; i < a.inputs.size(); ++i) {  // the same file twice would be its documents twice
    struct stat si {};
    if (::stat(a.inputs[i].c_str(), &si) != 0) continue;  // unreadable: the reader says so
    for (std::size_t j = 0; j < i; ++j) {
      struct stat sj {};
      if (::stat(a.inputs[j].c_str(), &sj) == 0 && si.st_dev == sj.st_dev && si.st_ino == sj.st_ino)
        throw UserError("the input '" + a.inputs[i] + "' is the same file as '" + a.inputs[j] +
                        "': its documents would be written twice; give each file once");
    }
  }
  for (std::size_t i = 0; i < a.json_keys.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (a.json_keys[i] == a.json_keys[j]) throw UserError("--json-keys names \"" + a.json_keys[i] + "\" twice");
  if (a.sft && !given["json-keys"].defaulted()) throw UserError("--json-keys does not apply to --sft, whose records have their own keys");
  if (!a.sft && (!given["chat-template"].defaulted() || given.count("seq-length") || a.truncate))
    throw UserError("--chat-template, --seq-length and --truncate apply to --sft");
  if (given.count("seq-length") && (a.seq_length < 1 || a.seq_length > (1ll << 30)))
    throw UserError("--seq-length must be between 1 and 2^30, the model.seq_length you train at");
  if (a.truncate && !given.count("seq-length")) throw UserError("--truncate needs --seq-length N");
  if (given.count("workers") && (a.workers < 1 || a.workers > 1024)) throw UserError("--workers must be between 1 and 1024");
  if (a.workers == 0) a.workers = dtrain::cores_available();
  return a;
}

void create_output_dir(const std::string& prefix) {
  const std::filesystem::path dir = std::filesystem::path(prefix).parent_path();
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw UserError("cannot create the output directory '" + dir.string() + "' (" + ec.message() +
                    "); choose a writable --out");
  }
}

// Appends the bytes of the file at `path` to `text` (a tokenizer to train needs the whole text).
void append_file(const std::string& path, std::string& text) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  const auto fail = [&path](int err) {
    return UserError("cannot read input file '" + path + "' (" + std::strerror(err) + "); check the path");
  };
  if (!f) throw fail(errno);
  std::vector<char> chunk(1 << 20);
  std::size_t n = 0;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), f.get())) > 0) text.append(chunk.data(), n);
  if (std::ferror(f.get())) throw fail(errno);
}

[[noreturn]] void throw_empty_input(const std::vector<std::string>& inputs) {
  throw UserError("the input is empty (no bytes in " + std::to_string(inputs.size()) + " file(s)); give files with content");
}

// The run's tokenizer and its data.tokenizer value: --tokenizer, or with --train-tokenizer a SentencePiece
// model first trained on all the inputs and written to PREFIX.model.
struct RunTokenizer {
  std::string spec;
  std::unique_ptr<dtrain::Tokenizer> tokenizer;
};

RunTokenizer open_tokenizer(const Args& a) {
  RunTokenizer t{a.tokenizer, nullptr};
  if (a.train_sentencepiece) {
    std::string text;
    for (const std::string& path : a.inputs) append_file(path, text);
    if (text.empty()) throw_empty_input(a.inputs);
    dtrain::train_sentencepiece(text, a.vocab_size, a.out);
    t.spec = "sentencepiece:" + a.out + ".model";
    std::cout << "dtrain-data: wrote " << a.out << ".model (SentencePiece, " << a.vocab_size << " pieces)\n";
  }
  t.tokenizer = dtrain::make_tokenizer(t.spec);
  return t;
}

// What to add to data.path=PREFIX to train on the output.
std::string train_hint(const RunTokenizer& t) {
  if (t.spec == "byte") return std::string();
  return " data.tokenizer=" + t.spec + " (model.vocab_size >= " + std::to_string(t.tokenizer->vocab_size()) + ")";
}

// Number of tokens for the val file: the rounded fraction, at least 1 and leaving at least 1 to train.
std::size_t val_count(std::size_t total, double fraction) {
  const auto n = static_cast<std::size_t>(std::llround(static_cast<double>(total) * fraction));
  return std::min(std::max<std::size_t>(n, 1), total - 1);
}

// Where each stream's documents go.
struct Output {
  std::string prefix;
  std::vector<std::uint32_t> tokens;  // dtrain format: every document, in order
  std::vector<std::uint8_t> mask;     // dtrain format with --sft
  std::unique_ptr<dtrain::MegatronWriter> writer, mask_writer;  // megatron format
};

std::vector<std::string> stream_prefixes(const Args& a) {
  if (a.sft || dtrain::input_kind(a.inputs[0]) == dtrain::InputKind::text) return {a.out};
  std::vector<std::string> out;
  for (const std::string& key : a.json_keys) out.push_back(a.out + "_" + key + "_document");
  return out;
}

void print_summary(const dtrain::IngestReport& r, const Args& a, const RunTokenizer& t) {
  char line[512];
  std::snprintf(line, sizeof line, "dtrain-data: read %llu bytes from %zu file(s) in %.2f s (%.1f MB/s, %d worker(s)): %llu documents, %llu tokens",
                static_cast<unsigned long long>(r.bytes), a.inputs.size(), r.seconds, r.bytes / 1e6 / std::max(r.seconds, 1e-9), a.workers,
                static_cast<unsigned long long>(r.documents), static_cast<unsigned long long>(r.tokens));
  std::cout << line << "; tokenizer " << t.spec << " (" << t.tokenizer->identity() << "), vocabulary " << t.tokenizer->vocab_size() << "\n";
  if (r.empty) std::cout << "dtrain-data: " << r.empty << " empty document(s) left out\n";
  if (r.truncated) std::cout << "dtrain-data: " << r.truncated << " record(s) truncated to --seq-length + 1 tokens\n";
  if (r.skipped) std::cout << "dtrain-data: skipped " << r.skipped << " bad line(s) (--skip-bad-lines); the first: " << r.first_skipped << "\n";
}

int run(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  if (a.help) return 0;
  create_output_dir(a.out);
  const RunTokenizer t = open_tokenizer(a);
  dtrain::IngestOptions o;
  o.inputs = a.inputs, o.json_keys = a.json_keys, o.sft = a.sft, o.append_eod = a.append_eod, o.skip_bad_lines = a.skip_bad_lines;
  o.workers = a.workers, o.truncate = a.truncate;
  o.max_tokens = a.seq_length > 0 ? static_cast<std::uint64_t>(a.seq_length) + 1 : 0;
  o.progress = ::isatty(STDERR_FILENO) == 1;
  if (a.sft) o.chat_template = dtrain::chat_template_for(a.chat_template, *t.tokenizer);

  const bool megatron = a.format == dtrain::DataFormat::megatron;
  const int vocab = t.tokenizer->vocab_size();
  std::vector<std::unique_ptr<dtrain::StagedFile>> staged;  // the dtrain format's files, published together
  const auto stage = [&](const std::string& path, const char* what) -> dtrain::StagedFile& {
    return *staged.emplace_back(std::make_unique<dtrain::StagedFile>(path, what));
  };
  std::vector<Output> outs;
  for (const std::string& prefix : stream_prefixes(a)) {
    Output out;
    out.prefix = prefix;
    if (megatron) {
      out.writer = std::make_unique<dtrain::MegatronWriter>(prefix, vocab);
      if (a.sft) out.mask_writer = std::make_unique<dtrain::MegatronWriter>(dtrain::megatron_loss_mask_prefix(prefix), 2, dtrain::MegatronDType::uint8);
    }
    outs.push_back(std::move(out));
  }
  std::vector<std::uint32_t> mask_doc;
  const dtrain::IngestReport report = dtrain::ingest(o, *t.tokenizer, [&](std::size_t k, const std::uint32_t* tokens, std::size_t n, const std::uint8_t* mask) {
    Output& out = outs[k];
    if (!megatron) {
      out.tokens.insert(out.tokens.end(), tokens, tokens + n);
      if (mask) out.mask.insert(out.mask.end(), mask, mask + n);
      return;
    }
    out.writer->add_document(std::vector<std::uint32_t>(tokens, tokens + n));
    if (mask) {
      mask_doc.assign(mask, mask + n);
      out.mask_writer->add_document(mask_doc);
    }
  });
  if (report.bytes == 0) throw_empty_input(a.inputs);
  print_summary(report, a, t);
  if (report.documents == 0) throw UserError("the input makes no tokens (every document is empty or was skipped); nothing written");

  for (Output& out : outs) {
    if (megatron) {
      out.writer->close();
      if (out.mask_writer) out.mask_writer->close();
      continue;
    }
    if (out.tokens.size() < 2)
      throw UserError("'" + out.prefix + "' gets " + std::to_string(out.tokens.size()) +
                      " token(s); at least 2 are needed to fill both a train and a val file");
    const auto split = static_cast<std::ptrdiff_t>(out.tokens.size() - val_count(out.tokens.size(), a.val_fraction));
    for (const bool val : {false, true}) {
      const std::string path = out.prefix + (val ? ".val.bin" : ".train.bin");
      const auto first = val ? split : 0, last = val ? static_cast<std::ptrdiff_t>(out.tokens.size()) : split;
      const std::uint64_t hash = dtrain::TokenFile::write(stage(path, "token file"), {out.tokens.begin() + first, out.tokens.begin() + last},
                                                          vocab, t.tokenizer->identity());
      if (a.sft)
        dtrain::write_loss_mask(stage(dtrain::loss_mask_path(path), "loss mask file"), {out.mask.begin() + first, out.mask.begin() + last}, hash);
    }
  }
  // Everything is on disk (written, synced, closed): publish it all at once, all or nothing.
  std::vector<dtrain::StagedFile*> files;
  for (Output& out : outs)
    for (const auto* w : {out.writer.get(), out.mask_writer.get()})
      if (w) for (auto* f : w->files()) files.push_back(f);
  for (auto& f : staged) files.push_back(f.get());
  dtrain::publish_together(files);
  for (const Output& out : outs) {
    if (megatron) {
      std::cout << "dtrain-data: wrote " << out.prefix << ".bin and " << out.prefix << ".idx (" << out.writer->num_tokens() << " tokens in "
                << out.writer->num_documents() << " documents, " << (out.writer->dtype() == dtrain::MegatronDType::uint16 ? "uint16" : "int32")
                << ")" << (a.sft ? " and the loss mask " + dtrain::megatron_loss_mask_prefix(out.prefix) + ".bin/.idx" : "") << "\n"
                << "dtrain-data: train on it with data.format=megatron data.path=" << out.prefix << train_hint(t) << "\n";
      continue;
    }
    const std::size_t val = val_count(out.tokens.size(), a.val_fraction);
    std::cout << "dtrain-data: wrote " << out.prefix << ".train.bin (" << out.tokens.size() - val << " tokens) and " << out.prefix
              << ".val.bin (" << val << " tokens)" << (a.sft ? " with their loss masks (.lossmask.bin)" : "") << "\n"
              << "dtrain-data: train on it with data.path=" << out.prefix << train_hint(t) << "\n";
  }
  if (megatron)
    std::cout << "dtrain-data: a Megatron dataset does not record its tokenizer, so dtrain cannot check that data.tokenizer is this one\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dtrain::run_tool("dtrain-data", argc, argv, run); }
