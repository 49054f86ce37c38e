// Checkpoint directory bookkeeping: manifests' sequence numbers, latest, pruning, stale temporaries.
#include "ckpt/directory.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "ckpt/shard.hpp"
#include "common/error.hpp"

namespace fs = std::filesystem;

namespace dtrain {
namespace {

constexpr const char* kPrunedPrefix = ".tmp-pruned-";  // a pruned checkpoint waiting to be removed

}  // namespace

std::vector<PublishedCheckpoint> published_checkpoints(const std::string& dir) {
  std::vector<PublishedCheckpoint> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("step_", 0) != 0) continue;
    PublishedCheckpoint c;
    c.name = name;
    try {
      const Manifest m = read_manifest(e.path().string() + "/manifest.txt");
      c.step = m.step;
      c.sequence = m.sequence;
      c.val_loss = m.val_loss;
      c.run_id = m.run_id;
    } catch (const UserError&) {
      continue;  // not something this dtrain can identify (another format, a copy, an I/O error): left alone
    }
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const PublishedCheckpoint& a, const PublishedCheckpoint& b) {
    if (a.sequence != b.sequence) return a.sequence < b.sequence;
    return a.step != b.step ? a.step < b.step : a.name < b.name;
  });
  return out;
}

std::int64_t next_publication_sequence(const std::string& dir) {
  std::int64_t most = 0;
  for (const auto& c : published_checkpoints(dir)) most = std::max(most, c.sequence);
  return most + 1;
}

std::vector<bool> kept_checkpoints(const std::vector<PublishedCheckpoint>& all, Retention keep) {
  std::vector<bool> kept(all.size(), false);
  const std::size_t last = static_cast<std::size_t>(std::max(1, keep.keep_last));
  for (std::size_t i = all.size() > last ? all.size() - last : 0; i < all.size(); ++i) kept[i] = true;
  std::vector<std::size_t> measured;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].val_loss && all[i].run_id == keep.run) measured.push_back(i);
  std::stable_sort(measured.begin(), measured.end(), [&](std::size_t a, std::size_t b) { return *all[a].val_loss < *all[b].val_loss; });
  for (std::size_t k = 0; k < measured.size() && k < static_cast<std::size_t>(std::max(0, keep.keep_best)); ++k) kept[measured[k]] = true;
  return kept;
}

void prune_checkpoints(const std::string& dir, Retention keep, std::vector<std::string>* set_aside) {
  const auto all = published_checkpoints(dir);
  const std::string latest = latest_checkpoint(dir);
  const std::vector<bool> kept = kept_checkpoints(all, keep);
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (kept[i]) continue;
    const std::string path = dir + "/" + all[i].name;
    std::error_code ec;
    if (!latest.empty() && fs::equivalent(path, latest, ec)) continue;  // however `latest` spells it
    if (set_aside) {
      const std::string aside = dir + "/" + kPrunedPrefix + all[i].name;
      fs::remove_all(aside, ec);  // left by an earlier run
      fs::rename(path, aside, ec);
      if (!ec) {
        set_aside->push_back(aside);
        continue;
      }
    }
    fs::remove_all(path, ec);
  }
}

std::string find_run_checkpoint(const std::vector<std::string>& dirs, std::int64_t step, std::uint64_t run_id) {
  for (const std::string& d : dirs) {
    const std::string path = d + "/" + step_dir_name(step);
    try {
      const Manifest m = read_manifest(path + "/manifest.txt");
      if (m.step == step && m.run_id == run_id) return path;
    } catch (const UserError&) {
    }
  }
  return "";
}

int remove_stale_temporaries(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(".tmp-", 0) == 0) {
      if (e.path().filename().string().rfind(kPrunedPrefix, 0) != 0) ++removed;
      fs::remove_all(e.path(), ec);
    }
  return removed;
}

std::string latest_checkpoint(const std::string& dir) {
  const std::string path = dir + "/latest";
  std::error_code ec;
  if (!fs::exists(path, ec)) return "";
  std::ifstream in(path);
  std::string name;
  if (!(in >> name))
    throw UserError("'" + path + "' is empty or unreadable, so the checkpoint to resume from is unknown; write the name of a " +
                    "step directory into it (e.g. step_00000100), or set checkpoint.load to a step directory");
  if (name.find('/') != std::string::npos || name == "." || name == "..")
    throw UserError("'" + path + "' names '" + name + "', which is not a step directory in " + dir +
                    "; write the name of one into it (e.g. step_00000100), or set checkpoint.load to a step directory");
  return dir + "/" + name;
}

}  // namespace dtrain
