// dtrain-data: turns text files into the token files dtrain trains on (PREFIX.train.bin and
// PREFIX.val.bin, data.path = PREFIX). A plain serial tool: it links dtrain_core but never starts MPI.
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
#include "config/cli.hpp"
#include "data/token_file.hpp"

namespace po = boost::program_options;
using dtrain::UserError;

namespace {

constexpr int kByteVocab = 256;

struct Args {
  std::string out;
  double val_fraction = 0.1;
  std::string tokenizer = "byte";
  std::vector<std::string> inputs;
  bool help = false;
};

po::options_description visible_options(Args& a) {
  po::options_description d("Options");
  d.add_options()
      ("help,h", po::bool_switch(&a.help), "print this help and exit")
      ("out,o", po::value(&a.out)->value_name("PREFIX"),
       "output prefix: writes PREFIX.train.bin and PREFIX.val.bin (directories are created)")
      ("val-fraction", po::value(&a.val_fraction)->value_name("F")->default_value(0.1, "0.1"),
       "fraction of the tokens, taken from the end of the text, that goes to the val file; 0 < F < 1")
      ("tokenizer", po::value(&a.tokenizer)->value_name("NAME")->default_value("byte"),
       "byte: each byte of the text is one token (vocabulary 256)");
  return d;
}

void print_usage(const po::options_description& visible) {
  std::cout << "Usage: dtrain-data --out PREFIX [--val-fraction F] [--tokenizer byte] INPUT.txt [MORE.txt ...]\n"
               "Reads the text files (concatenated in order), tokenises them and splits the tokens: the\n"
               "first 1-F go to PREFIX.train.bin, the last F to PREFIX.val.bin. Train on them with\n"
               "data.path=PREFIX.\n\n"
            << visible;
}

Args parse_args(int argc, char** argv) {
  Args a;
  po::options_description visible = visible_options(a);
  po::options_description all;
  all.add(visible).add_options()("input", po::value(&a.inputs));
  po::positional_options_description positional;
  positional.add("input", -1);
  dtrain::parse_command_line_options(argc, argv, 1, all, positional, "dtrain-data");
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
  if (a.tokenizer != "byte") throw UserError("unknown --tokenizer '" + a.tokenizer + "'; the tokenizers are: byte");
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

std::string read_inputs(const std::vector<std::string>& inputs) {
  std::string text;
  for (const std::string& path : inputs) append_file(path, text);
  if (text.empty()) throw UserError("the input is empty (no bytes in " + std::to_string(inputs.size()) + " file(s)); give text files with content");
  if (text.size() < 2) {
    throw UserError("the input holds " + std::to_string(text.size()) +
                    " byte(s) of text; at least 2 are needed to fill both a train and a val file");
  }
  return text;
}

std::vector<std::uint32_t> byte_tokens(const std::string& text, std::size_t begin, std::size_t end) {
  std::vector<std::uint32_t> tokens(end - begin);
  for (std::size_t i = begin; i < end; ++i) tokens[i - begin] = static_cast<unsigned char>(text[i]);
  return tokens;
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

void write_split(const std::string& path, const std::vector<std::uint32_t>& tokens) {
  dtrain::TokenFile::write(path, tokens, kByteVocab);
  std::cout << "dtrain-data: wrote " << path << " (" << tokens.size() << " tokens)\n";
}

int run(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  if (a.help) return 0;
  const std::string text = read_inputs(a.inputs);
  std::cout << "dtrain-data: read " << text.size() << " bytes from " << a.inputs.size()
            << " file(s); byte tokenizer, vocabulary " << kByteVocab << "\n";
  const std::size_t split = text.size() - val_count(text.size(), a.val_fraction);
  create_output_dir(a.out);
  write_split(a.out + ".train.bin", byte_tokens(text, 0, split));
  write_split(a.out + ".val.bin", byte_tokens(text, split, text.size()));
  std::cout << "dtrain-data: train on it with data.path=" << a.out << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dtrain::run_tool("dtrain-data", argc, argv, run); }
