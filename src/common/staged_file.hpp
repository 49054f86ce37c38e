// Files published whole or not at all. A file is written under a temporary name beside its final one
// (PATH.tmp.<pid>); every write, the fsync and the close are checked; only then is it renamed over PATH
// and the directory synced. A failure at any step removes the temporary and throws one UserError that
// names the file, the step and the system's reason: a reader never sees a partial file, a full disk
// never leaves one behind, and nothing claims to be complete that is not.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

// The temporary a file is staged under: PATH.tmp.<pid>, so that processes writing beside each other
// (ranks, tools) never share one.
std::string staged_name(const std::string& path);

class StagedFile {
 public:
  // Creates the temporary of `path`. `what` names the file in errors ("token file", "config.json").
  StagedFile(std::string path, std::string what);
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  ~StagedFile();  // unless published: closes and removes the temporary

  void write(const void* data, std::size_t bytes);  // buffered; all of it, or a UserError
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Flushes, syncs and closes the temporary. publish() then renames it: two steps, so that a writer of
  // several files finishes all of them before it publishes any.
  void finish();
  void publish();  // finish() first when not done yet
  const std::string& path() const { return path_; }
  const std::string& temporary() const { return tmp_; }

 private:
  void flush();
  [[noreturn]] void fail(const std::string& step, int err);
  std::string path_, tmp_, what_;
  int fd_ = -1;
  std::vector<char> buffer_;
  bool finished_ = false, published_ = false;
};

// Publishes finished files in order, all or none: when one cannot be published, those published before
// it are removed again (a dataset's data without its index is not a dataset) and the error thrown.
void publish_together(const std::vector<StagedFile*>& files);

// The whole of `bytes` as `path`, staged and published.
void write_file_atomically(const std::string& path, std::string_view bytes, const std::string& what);

// For a temporary that another library wrote and closed (HDF5): syncs it, renames it over `path` and
// syncs the directory; on failure removes it and throws a UserError naming `what`.
void publish_file(const std::string& tmp, const std::string& path, const std::string& what);

// Syncs a file or a directory to disk (open, fsync, close, each checked); throws a UserError.
void sync_path(const std::string& path);

// The directory part of a path ("." for a bare name).
std::string parent_directory(const std::string& path);

}  // namespace dtrain
