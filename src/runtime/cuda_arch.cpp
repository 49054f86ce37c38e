// cuda_code_for and cuda_build_refusal: CMake's architecture list against a GPU's compute capability.
#include "runtime/cuda_arch.hpp"

#include <cctype>
#include <sstream>

namespace dtrain {

int cuda_code_for(int cc, const std::string& architectures) {
  int sass = 0, ptx = 0;
  bool any = false;
  std::istringstream in(architectures);
  for (std::string entry; std::getline(in, entry, ';');) {
    if (entry.empty()) continue;
    std::size_t digits = 0;
    while (digits < entry.size() && std::isdigit(static_cast<unsigned char>(entry[digits]))) ++digits;
    if (digits < 2 || digits > 3) return -1;  // native, all, all-major: decided when CMake configured
    const int arch = std::stoi(entry.substr(0, digits));
    std::string rest = entry.substr(digits);
    if (!rest.empty() && std::isalpha(static_cast<unsigned char>(rest[0]))) rest.erase(0, 1);  // 90a: arch-specific features
    const bool real = rest.empty() || rest == "-real", virt = rest.empty() || rest == "-virtual";
    if (!real && !virt) return -1;
    any = true;
    if (real && arch / 10 == cc / 10 && arch <= cc && arch > sass) sass = arch;
    if (virt && arch <= cc && arch > ptx) ptx = arch;
  }
  if (!any) return -1;
  return sass ? sass : ptx;
}

std::string cuda_build_refusal(int cc, const std::string& architectures) {
  const int code = cuda_code_for(cc, architectures);
  if (code < 0 || (code > 0 && (code < 80) == (cc < 80))) return "";
  const std::string gpu = std::to_string(cc / 10) + "." + std::to_string(cc % 10);
  std::ostringstream os;
  os << "this build of dtrain was compiled for CUDA architectures " << architectures << " (CMAKE_CUDA_ARCHITECTURES), ";
  if (code == 0)
    os << "which have no code a GPU of compute capability " << gpu << " can run";
  else
    os << "so a GPU of compute capability " << gpu << " would run code compiled for sm_" << code
       << ", whose kernels take the paths of GPUs " << (code < 80 ? "before" : "from") << " sm_80";
  os << "; rebuild with -DCMAKE_CUDA_ARCHITECTURES=" << cc << " (or the default list, 75;80;90)";
  return os.str();
}

}  // namespace dtrain
