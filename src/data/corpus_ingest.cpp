// ingest(): the reading thread cuts the inputs into batches of documents, OrderedWorkers tokenise them,
// and the results reach the sink in input order; a progress line on a terminal.
#include "data/corpus_ingest.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "common/error.hpp"
#include "data/input_stream.hpp"
#include "data/json_record.hpp"
#include "data/ordered_workers.hpp"

namespace dtrain {
namespace {

constexpr std::size_t kBatchBytes = std::size_t{1} << 20;  // text per batch, so that N workers stay busy
constexpr std::size_t kBatchItems = 4096;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct Batch {
  std::size_t file = 0;
  std::vector<std::string> items;    // paragraphs or JSON lines
  std::vector<std::uint64_t> lines;  // each item's (first) line number
  std::size_t bytes = 0;
};

struct StreamOut {
  std::vector<std::uint32_t> tokens;
  std::vector<std::uint64_t> lengths;  // of each document, in order
  std::vector<std::uint8_t> mask;      // sft only
};

struct BatchOut {
  std::vector<StreamOut> streams;
  std::uint64_t empty = 0, truncated = 0, bytes = 0;
  std::vector<std::string> skipped;  // "FILE:LINE: why"
};

struct WorkerState {
  std::unique_ptr<Tokenizer> tokenizer;
  JsonRecordParser parser;
};

class Tokenise {
 public:
  Tokenise(const IngestOptions& o, InputKind kind, const Tokenizer& t)
      : o_(o), kind_(kind), streams_(ingest_streams(o, kind)), eod_(t.eod()) {
    if (o.sft) renderer_.emplace(o.chat_template, t);
  }

  BatchOut operator()(WorkerState& w, const Batch& b) const {
    BatchOut out;
    out.streams.resize(streams_);
    out.bytes = b.bytes;
    for (std::size_t i = 0; i < b.items.size(); ++i) {
      try {
        item(w, b.items[i], out);
      } catch (const RecordError& e) {
        const std::string where = o_.inputs[b.file] + ":" + std::to_string(b.lines[i]);
        if (!o_.skip_bad_lines)
          throw UserError("input file '" + o_.inputs[b.file] + "', line " + std::to_string(b.lines[i]) + ": " + e.what() +
                          "; fix or remove the line, or pass --skip-bad-lines to skip such lines");
        out.skipped.push_back(where + ": " + e.what());
      }
    }
    return out;
  }

 private:
  void add(StreamOut& s, std::vector<std::uint32_t> ids, const std::vector<std::uint8_t>* mask, BatchOut& out) const {
    if (ids.empty()) {
      ++out.empty;
      return;
    }
    s.tokens.insert(s.tokens.end(), ids.begin(), ids.end());
    s.lengths.push_back(ids.size());
    if (mask) s.mask.insert(s.mask.end(), mask->begin(), mask->end());
  }

  void item(WorkerState& w, const std::string& text, BatchOut& out) const {
    if (kind_ == InputKind::text) {
      std::vector<std::uint32_t> ids = w.tokenizer->encode(text);
      if (o_.append_eod && !ids.empty()) ids.push_back(*eod_);
      return add(out.streams[0], std::move(ids), nullptr, out);
    }
    if (!o_.sft) {
      // Every key is read before any is added, so that a bad line adds nothing to any stream.
      const std::vector<std::string> texts = w.parser.texts(text, o_.json_keys);
      std::vector<std::vector<std::uint32_t>> ids(texts.size());
      for (std::size_t k = 0; k < texts.size(); ++k) {
        ids[k] = w.tokenizer->encode(texts[k]);
        if (o_.append_eod && !ids[k].empty()) ids[k].push_back(*eod_);
      }
      for (std::size_t k = 0; k < texts.size(); ++k) add(out.streams[k], std::move(ids[k]), nullptr, out);
      return;
    }
    const SftRecord record = w.parser.sft(text);
    // Every answer trains something: the parser saw each non-empty, and none may be only whitespace.
    for (std::size_t k = record.pair ? 1 : 0; k < record.messages.size(); ++k)
      if ((record.pair || record.messages[k].role == "assistant") && trim_whitespace(record.messages[k].content).empty())
        throw RecordError("the assistant's content is only whitespace: nothing to train on (" +
                          (record.pair ? std::string("the completion") : "message " + std::to_string(k + 1)) + ")");
    MaskedTokens r = renderer_->render(record, *w.tokenizer);
    const auto trained = [&] {
      for (std::uint8_t m : r.mask)
        if (m) return true;
      return false;
    };
    if (o_.max_tokens > 0 && r.tokens.size() > o_.max_tokens) {
      if (!o_.truncate)
        throw RecordError("the record renders to " + std::to_string(r.tokens.size()) + " tokens, more than the " +
                          std::to_string(o_.max_tokens) + " a sample of --seq-length holds; shorten it, or pass --truncate");
      // Cut to max_tokens, the last of them the end-of-document token (documents stay delimited).
      const std::size_t keep = eod_ ? o_.max_tokens - 1 : o_.max_tokens;
      r.tokens.resize(keep), r.mask.resize(keep);
      if (eod_) r.tokens.push_back(*eod_), r.mask.push_back(0);
      if (!trained())
        throw RecordError("the record renders to more than " + std::to_string(o_.max_tokens) +
                          " tokens and its trained part starts after them: truncating leaves nothing to train on");
      ++out.truncated;
    }
    add(out.streams[0], std::move(r.tokens), &r.mask, out);
  }

  const IngestOptions& o_;
  InputKind kind_;
  std::size_t streams_;
  std::optional<std::uint32_t> eod_;
  std::optional<ChatRenderer> renderer_;
};

std::string human(double v, const char* unit) {
  char buf[64];
  if (v >= 1e9) std::snprintf(buf, sizeof buf, "%.2fG%s", v / 1e9, unit);
  else if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM%s", v / 1e6, unit);
  else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk%s", v / 1e3, unit);
  else std::snprintf(buf, sizeof buf, "%.0f%s", v, unit);
  return buf;
}

// The progress line: documents, bytes and tokens with their rates, and the ETA from the share of the
// input files' bytes read.
class Progress {
 public:
  Progress(bool on, const std::vector<std::string>& inputs) : on_(on), start_(Clock::now()), last_(start_) {
    for (const std::string& p : inputs) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(p, ec);
      total_ += ec ? 0 : size;
    }
  }
  void update(const IngestReport& r, std::uint64_t file_bytes, bool force = false) {
    if (!on_) return;
    const auto now = Clock::now();
    if (!force && now - last_ < std::chrono::milliseconds(500)) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    std::string eta = "?";
    if (file_bytes > 0 && total_ >= file_bytes) {
      const double left = s * static_cast<double>(total_ - file_bytes) / static_cast<double>(file_bytes);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%d:%02d:%02d", static_cast<int>(left / 3600), static_cast<int>(left / 60) % 60, static_cast<int>(left) % 60);
      eta = buf;
    }
    std::fprintf(stderr, "\rdtrain-data: %s documents, %s (%s/s), %s tokens (%s/s), ETA %s   ", human(static_cast<double>(r.documents), "").c_str(),
                 human(static_cast<double>(r.bytes), "B").c_str(), human(r.bytes / (s > 0 ? s : 1), "B").c_str(),
                 human(static_cast<double>(r.tokens), "").c_str(), human(r.tokens / (s > 0 ? s : 1), "").c_str(), eta.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (shown_) std::fprintf(stderr, "\r%*s\r", 100, "");
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_, shown_ = false;
  Clock::time_point start_, last_;
  std::uint64_t total_ = 0;
};

}  // namespace

InputKind input_kind(const std::string& path) {
  std::string p = path;
  p.resize(p.size() - std::strlen(compression_suffix(compression_of(p))));
  return ends_with(p, ".jsonl") || ends_with(p, ".json") ? InputKind::json : InputKind::text;
}

std::size_t ingest_streams(const IngestOptions& options, InputKind kind) {
  return kind == InputKind::json && !options.sft ? options.json_keys.size() : 1;
}

IngestReport ingest(const IngestOptions& o, const Tokenizer& tokenizer, const DocumentSink& sink) {
  const InputKind kind = input_kind(o.inputs.at(0));
  for (const std::string& p : o.inputs)
    if (input_kind(p) != kind)
      throw UserError("the inputs mix JSON Lines ('" + o.inputs[0] + "') and text ('" + p + "'); give files of one kind");
  if (o.sft && kind != InputKind::json) throw UserError("--sft reads JSON Lines (.jsonl, .json, optionally .gz, .zst, .xz or .bz2), not text");
  if ((o.append_eod || o.sft) && !tokenizer.eod())
    throw UserError(std::string(o.sft ? "--sft" : "--append-eod") + " needs an end-of-document token, which the tokenizer (" +
                    tokenizer.identity() + ") lacks; use gpt2, hf:DIR or sentencepiece");
  const Tokenise tokenise(o, kind, tokenizer);
  std::vector<WorkerState> states(static_cast<std::size_t>(std::max(o.workers, 1)));
  for (WorkerState& s : states) s.tokenizer = tokenizer.clone();
  OrderedWorkers<Batch, BatchOut> workers(o.workers, [&](int w, Batch& b) { return tokenise(states[static_cast<std::size_t>(w)], b); });

  IngestReport report;
  Progress progress(o.progress, o.inputs);
  std::uint64_t files_done_bytes = 0;
  const LineReader* current = nullptr;
  const auto take = [&](BatchOut out) {
    for (std::size_t k = 0; k < out.streams.size(); ++k) {
      const StreamOut& s = out.streams[k];
      std::size_t at = 0;
      for (const std::uint64_t len : s.lengths) {
        sink(k, s.tokens.data() + at, len, s.mask.empty() ? nullptr : s.mask.data() + at);
        at += len;
      }
      report.documents += s.lengths.size();
      report.tokens += s.tokens.size();
    }
    report.empty += out.empty, report.truncated += out.truncated, report.bytes += out.bytes;
    report.skipped += out.skipped.size();
    if (report.first_skipped.empty() && !out.skipped.empty()) report.first_skipped = out.skipped.front();
    progress.update(report, files_done_bytes + (current ? current->stream().file_bytes_read() : 0));
  };
  const auto submit = [&](Batch& b) {
    if (b.items.empty()) return;
    while (workers.full()) take(std::move(*workers.next()));
    const std::size_t file = b.file;
    workers.submit(std::move(b));
    b = Batch{};
    b.file = file;
  };

  for (std::size_t f = 0; f < o.inputs.size(); ++f) {
    LineReader reader(open_input(o.inputs[f]));
    current = &reader;
    Batch batch;
    batch.file = f;
    const auto push = [&](std::string item, std::uint64_t line) {
      batch.bytes += item.size();
      batch.items.push_back(std::move(item));
      batch.lines.push_back(line);
      if (batch.bytes >= kBatchBytes || batch.items.size() >= kBatchItems) submit(batch);
    };
    std::string_view line;
    if (kind == InputKind::json) {
      while (reader.next(line)) {
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) {  // blank lines separate nothing in JSON Lines
          batch.bytes += line.size() + 1;
          continue;
        }
        push(std::string(line), reader.line_number());
      }
    } else {
      // Paragraphs: a paragraph runs up to the next non-blank line that follows a blank one (a line of
      // spaces, tabs or \r only); paragraphs never span files.
      std::string para;
      std::uint64_t first_line = 1;
      bool seen_text = false, blank_after_text = false;
      while (reader.next(line)) {
        const bool blank = line.find_first_not_of(" \t\r") == std::string_view::npos;
        if (!blank && blank_after_text) {
          push(std::move(para), first_line);
          para.clear();
          first_line = reader.line_number();
        }
        blank_after_text = blank && (seen_text || blank_after_text);
        seen_text = seen_text || !blank;
        para.append(line.data(), line.size());
        if (reader.newline()) para.push_back('\n');
      }
      if (!para.empty()) push(std::move(para), first_line);
    }
    submit(batch);
    files_done_bytes += reader.stream().file_bytes_read();
    current = nullptr;
  }
  while (auto out = workers.next()) take(std::move(*out));
  progress.update(report, files_done_bytes, true);
  progress.clear();
  report.seconds = progress.seconds();
  return report;
}

}  // namespace dtrain
