// megatron_dump PREFIX: prints a Megatron dataset as dtrain reads it, one line per document (its tokens,
// space-separated), for tests that write datasets with other tools (tests/e2e/megatron_format.py).
#include <iostream>
#include <vector>

#include "common/error.hpp"
#include "data/megatron_dataset.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: megatron_dump PREFIX\n";
    return 2;
  }
  try {
    dtrain::MegatronDataset data = dtrain::MegatronDataset::open(argv[1]);
    const std::uint64_t documents = data.num_documents();
    for (std::uint64_t d = 0; d < documents; ++d) {
      data.keep_documents(d, d + 1);
      std::vector<int> tokens(data.size());
      data.read(0, static_cast<int>(tokens.size()), tokens.data());
      for (std::size_t t = 0; t < tokens.size(); ++t) std::cout << (t ? " " : "") << tokens[t];
      std::cout << "\n";
    }
  } catch (const dtrain::UserError& e) {
    std::cerr << "megatron_dump: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
