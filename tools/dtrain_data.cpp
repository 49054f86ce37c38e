// dtrain-data: turns text files into the token files dtrain trains on (PREFIX.train.bin and
// PREFIX.val.bin, data.path = PREFIX), or into a Megatron indexed dataset (PREFIX.bin + PREFIX.idx,
// data.format = megatron), with any tokenizer (optionally a SentencePiece model trained first). A plain
// serial tool: it links dtrain_core but never starts MPI.
#include <boost/program_options.hpp>

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
#include "config/choices.hpp"
#include "config/cli.hpp"
#include "config/tokenizer_spec.hpp"
#include "data/megatron_writer.hpp"
#include "data/token_file.hpp"
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
  bool help = false;
};

po::options_description visible_options(Args& a) {
  po::options_description d("Options");
  d.add_options()
      ("help,h", po::bool_switch(&a.help), "print this help and exit")
      ("out,o", po::value(&a.out)->value_name("PREFIX"),
       "output prefix: writes PREFIX.train.bin and PREFIX.val.bin, or PREFIX.bin and PREFIX.idx with --format "
       "megatron (directories are created)")
      ("val-fraction", po::value(&a.val_fraction)->value_name("F")->default_value(0.1, "0.1"),
       "fraction of the tokens, taken from the end of the text, that goes to the val file; 0 < F < 1")
      ("tokenizer", po::value(&a.tokenizer)->value_name("NAME")->default_value("byte"),
       "byte: each byte of the text is one token (vocabulary 256); gpt2: GPT-2's BPE (vocabulary 50257) from "
       "data/tokenizers/gpt2 (tools/fetch-data fetches it), gpt2:DIR from DIR/encoder.json and DIR/vocab.bpe; "
       "sentencepiece:MODEL_FILE: a SentencePiece model")
      ("train-tokenizer", po::value(&a.train_tokenizer)->value_name("sentencepiece"),
       "first train a SentencePiece model of --vocab-size pieces on the text (lossless: no normalisation, "
       "whitespace kept, byte fallback) and write it to PREFIX.model (and PREFIX.vocab), then tokenise with it; "
       "train on the files with data.tokenizer=sentencepiece:PREFIX.model")
      ("vocab-size", po::value(&a.vocab_size)->value_name("N"), "vocabulary size of --train-tokenizer (e.g. 2000)")
      ("format", po::value(&a.format_word)->value_name("FORMAT")->default_value("dtrain"),
       "dtrain: PREFIX.train.bin + PREFIX.val.bin; megatron: one Megatron-LM indexed dataset PREFIX.bin + "
       "PREFIX.idx (uint16 tokens below a vocabulary of 65500, else int32), one document per paragraph, each "
       "encoded on its own (a paragraph ends with its blank lines; documents never span files), no val split "
       "(dtrain cuts it by data.split). Megatron's layout has no place for the tokenizer: dtrain checks the ids "
       "against model.vocab_size but cannot tell which tokenizer made them, so train with the same one "
       "(data.tokenizer)");
  return d;
}

void print_usage(const po::options_description& visible) {
  std::cout << "Usage: dtrain-data --out PREFIX [--val-fraction F] [--tokenizer byte|gpt2|sentencepiece:MODEL] [--format dtrain|megatron] INPUT.txt [MORE.txt ...]\n"
               "       dtrain-data --out PREFIX --train-tokenizer sentencepiece --vocab-size N [--val-fraction F] [--format dtrain|megatron] INPUT.txt [MORE.txt ...]\n"
               "Reads the text files (concatenated in order), tokenises them and splits the tokens: the\n"
               "first 1-F go to PREFIX.train.bin, the last F to PREFIX.val.bin. Train on them with\n"
               "data.path=PREFIX.\n"
               "With --format megatron it writes PREFIX.bin + PREFIX.idx instead, one document per paragraph;\n"
               "train on it with data.format=megatron data.path=PREFIX (data.split cuts train and val) and the\n"
               "same data.tokenizer: the dataset does not record its tokenizer, so dtrain cannot check it.\n\n"
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
  if (a.inputs.empty()) throw UserError("no input text files given; see dtrain-data --help");
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
  return a;
}

// Appends the bytes of the file at `path` to `text`.
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
  throw UserError("the input is empty (no bytes in " + std::to_string(inputs.size()) + " file(s)); give text files with content");
}

std::string read_inputs(const std::vector<std::string>& inputs) {
  std::string text;
  for (const std::string& path : inputs) append_file(path, text);
  if (text.empty()) throw_empty_input(inputs);
  return text;
}

// Number of tokens for the val file: the rounded fraction, at least 1 and leaving at least 1 to train.
std::size_t val_count(std::size_t total, double fraction) {
  const auto n = static_cast<std::size_t>(std::llround(static_cast<double>(total) * fraction));
  return std::min(std::max<std::size_t>(n, 1), total - 1);
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

// The run's tokenizer and its data.tokenizer value: --tokenizer, or with --train-tokenizer a SentencePiece
// model first trained on `text` (all the inputs) and written to PREFIX.model.
struct RunTokenizer {
  std::string spec;
  std::unique_ptr<dtrain::Tokenizer> tokenizer;
};

RunTokenizer open_tokenizer(const Args& a, const std::string& text) {
  RunTokenizer t{a.tokenizer, nullptr};
  if (a.train_sentencepiece) {
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

void write_split(const std::string& path, const std::vector<std::uint32_t>& tokens, const dtrain::Tokenizer& tokenizer) {
  dtrain::TokenFile::write(path, tokens, tokenizer.vocab_size(), tokenizer.identity());
  std::cout << "dtrain-data: wrote " << path << " (" << tokens.size() << " tokens)\n";
}

// Ends of the paragraphs of `text`: a paragraph runs up to the next non-blank line that follows a
// blank one (a line of spaces, tabs or \r only), so the paragraphs together are the text.
std::vector<std::size_t> paragraph_ends(const std::string& text) {
  std::vector<std::size_t> ends;
  bool seen_text = false, blank_after_text = false;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t eol = std::min(text.find('\n', at), text.size() - 1) + 1;
    const bool blank = std::min(text.find_first_not_of(" \t\r\n", at), text.size()) >= eol;
    if (!blank && blank_after_text) ends.push_back(at);
    blank_after_text = blank && (seen_text || blank_after_text);
    seen_text = seen_text || !blank;
    at = eol;
  }
  if (!text.empty()) ends.push_back(text.size());
  return ends;
}

// --format megatron: every paragraph of every input file, encoded on its own, becomes one document of
// PREFIX.bin/.idx. Only a tokenizer to train needs all the text at once; otherwise files are read one by one.
int write_megatron(const Args& a) {
  std::string all_text = a.train_sentencepiece ? read_inputs(a.inputs) : std::string();
  create_output_dir(a.out);
  const RunTokenizer t = open_tokenizer(a, all_text);
  std::string().swap(all_text);
  dtrain::MegatronWriter writer(a.out, t.tokenizer->vocab_size());
  std::uint64_t bytes = 0;
  for (const std::string& path : a.inputs) {
    std::string text;
    append_file(path, text);
    bytes += text.size();
    std::size_t begin = 0;
    for (const std::size_t end : paragraph_ends(text)) {
      writer.add_document(t.tokenizer->encode(text.substr(begin, end - begin)));
      begin = end;
    }
  }
  if (bytes == 0) throw_empty_input(a.inputs);
  writer.finish();
  std::cout << "dtrain-data: read " << bytes << " bytes from " << a.inputs.size() << " file(s); tokenizer " << t.spec << " ("
            << t.tokenizer->identity() << "), vocabulary " << t.tokenizer->vocab_size() << "\n"
            << "dtrain-data: wrote " << a.out << ".bin and " << a.out << ".idx (" << writer.num_tokens() << " tokens in "
            << writer.num_documents() << " documents, "
            << (writer.dtype() == dtrain::MegatronDType::uint16 ? "uint16" : "int32") << ")\n"
            << "dtrain-data: train on it with data.format=megatron data.path=" << a.out << train_hint(t) << "\n"
            << "dtrain-data: a Megatron dataset does not record its tokenizer, so dtrain cannot check that data.tokenizer "
               "is this one\n";
  return 0;
}

int run(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  if (a.help) return 0;
  if (a.format == dtrain::DataFormat::megatron) return write_megatron(a);
  const std::string text = read_inputs(a.inputs);
  create_output_dir(a.out);
  const RunTokenizer t = open_tokenizer(a, text);
  const std::vector<std::uint32_t> tokens = t.tokenizer->encode(text);
  std::cout << "dtrain-data: read " << text.size() << " bytes from " << a.inputs.size() << " file(s); tokenizer " << t.spec
            << " (" << t.tokenizer->identity() << "), vocabulary " << t.tokenizer->vocab_size() << ": " << tokens.size() << " tokens\n";
  if (tokens.size() < 2) {
    throw UserError("the input makes " + std::to_string(tokens.size()) +
                    " token(s); at least 2 are needed to fill both a train and a val file");
  }
  const auto split = static_cast<std::ptrdiff_t>(tokens.size() - val_count(tokens.size(), a.val_fraction));
  write_split(a.out + ".train.bin", {tokens.begin(), tokens.begin() + split}, *t.tokenizer);
  write_split(a.out + ".val.bin", {tokens.begin() + split, tokens.end()}, *t.tokenizer);
  std::cout << "dtrain-data: train on it with data.path=" << a.out << train_hint(t) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dtrain::run_tool("dtrain-data", argc, argv, run); }
