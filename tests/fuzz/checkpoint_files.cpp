// Fuzz target: a checkpoint directory as a resume and ckpt-consolidate read it: the `latest` file, the
// step directory's manifest, the shard files' attributes (every one CheckpointReader reads: the save's
// identity, step, layout, configuration and each piece's geometry and checksum), then every tensor of
// every kind read back and, without edits, the shard files verified against the manifest's hashes.
// The shards start as a real checkpoint that dtrain saved (tests/fuzz/checkpoint_base, one rank, a
// two-block byte-level GPT); the input rewrites it. Input: manifest.txt, "#dtrain-fuzz-next-file",
// attribute edits (one per line: OBJECT NAME TYPE VALUE, TYPE i = an int64, I = int64s "1,2,3",
// d = a double, s = the rest of the line as a string; at most 16), "#dtrain-fuzz-next-file", the text
// of `latest`. "@SIZE" in the manifest stands for the size of the shard file after the edits (which
// change it), so that edited attributes are read past the manifest's size check. HDF5's own file format is not fuzzed here (the HDF5 project's fuzzing covers it):
// the values dtrain reads from valid files are.
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/checkpoint.hpp"
#include "ckpt/directory.hpp"
#include "fuzz/fuzz_target.hpp"

namespace {

namespace fs = std::filesystem;

void apply_edit(hid_t file, const std::string& line) {
  std::istringstream in(line);
  std::string object, name, type;
  if (!(in >> object >> name >> type) || type.size() != 1) return;
  std::string value;
  std::getline(in >> std::ws, value);
  if (H5Oexists_by_name(file, object.c_str(), H5P_DEFAULT) <= 0) return;
  if (H5Aexists_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT) > 0)
    H5Adelete_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT);
  if (type == "s") {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, value.empty() ? 1 : value.size());
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate_by_name(file, object.c_str(), name.c_str(), t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const std::string padded = value.empty() ? std::string(1, '\0') : value;
    if (a >= 0) H5Awrite(a, t, padded.data()), H5Aclose(a);
    H5Sclose(space);
    H5Tclose(t);
    return;
  }
  std::vector<std::int64_t> ints;
  std::vector<double> doubles;
  std::istringstream list(value);
  for (std::string item; std::getline(list, item, ',') && ints.size() < 8;) {
    try {
      if (type == "d") doubles.push_back(std::stod(item));
      else ints.push_back(std::stoll(item));
    } catch (const std::exception&) {
      return;
    }
  }
  const bool is_double = type == "d";
  if (type != "i" && type != "I" && !is_double) return;
  hsize_t n = is_double ? doubles.size() : ints.size();
  if (n == 0 || (type == "i" && n != 1)) return;
  hid_t space = H5Screate_simple(1, &n, nullptr);
  hid_t a = H5Acreate_by_name(file, object.c_str(), name.c_str(), is_double ? H5T_IEEE_F64LE : H5T_STD_I64LE, space,
                              H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (a >= 0) {
    if (is_double) H5Awrite(a, H5T_NATIVE_DOUBLE, doubles.data());
    else H5Awrite(a, H5T_NATIVE_INT64, ints.data());
    H5Aclose(a);
  }
  H5Sclose(space);
}

}  // namespace

DTRAIN_FUZZ_TARGET(checkpoint_files) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const auto parts = dtrain::fuzz::split(data, size, "#dtrain-fuzz-next-file", 3);
  const fs::path base = fs::path(DTRAIN_SOURCE_DIR) / "tests/fuzz/checkpoint_base";
  const fs::path dir = fs::path(dtrain::fuzz::scratch_dir()) / "checkpoints";
  fs::remove_all(dir);
  // Copied through streams, which retry a read or write that libFuzzer's timer signal interrupts
  // (std::filesystem::copy fails with EINTR).
  fs::path step;
  for (const auto& d : fs::directory_iterator(base)) {
    step = dir / d.path().filename();
    fs::create_directories(step);
    for (const auto& f : fs::directory_iterator(d.path())) {
      std::ifstream in(f.path(), std::ios::binary);
      std::ofstream(step / f.path().filename(), std::ios::binary) << in.rdbuf();
    }
  }
  dtrain::fuzz::write_scratch("checkpoints/latest", parts[2]);
  std::istringstream edits{std::string(parts[1])};
  int applied = 0;
  for (std::string line; std::getline(edits, line) && applied < 16; ++applied) {
    for (const auto& e : fs::directory_iterator(step)) {
      if (e.path().extension() != ".h5") continue;
      const hid_t f = H5Fopen(e.path().c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      if (f < 0) continue;
      apply_edit(f, line);
      H5Fclose(f);
    }
  }
  std::string manifest(parts[0]);
  const std::string size_now = std::to_string(fs::file_size(step / "shard_00000.h5"));
  for (std::size_t at; (at = manifest.find("@SIZE")) != std::string::npos;) manifest.replace(at, 5, size_now);
  dtrain::fuzz::write_scratch("checkpoints/" + step.filename().string() + "/manifest.txt", manifest);
  (void)dtrain::published_checkpoints(dir.string());
  const std::string latest = dtrain::latest_checkpoint(dir.string());
  dtrain::CheckpointReader reader(latest.empty() ? step.string() : latest, false);
  for (const char* kind : dtrain::kPieceKinds) {
    if (!reader.has_kind(kind)) continue;
    for (const auto& name : reader.tensor_names()) (void)reader.global_tensor(kind, name);
  }
  if (applied == 0) reader.verify_files(0, 1);  // edits change the bytes the manifest's hash covers
}
