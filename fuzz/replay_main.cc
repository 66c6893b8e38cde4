// main() for the fuzz targets outside libFuzzer (the normal gcc build): runs every file named on
// the command line, or found below a named directory, through LLVMFuzzerTestOneInput once, in
// sorted order. A target signals a finding by aborting, so a clean exit means every input passed.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> InputsBelow(const std::vector<std::string>& roots) {
  std::vector<fs::path> inputs;
  for (const std::string& root : roots) {
    if (fs::is_directory(root)) {
      for (const auto& entry : fs::recursive_directory_iterator(root)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else if (fs::is_regular_file(root)) {
      inputs.push_back(root);
    } else {
      std::fprintf(stderr, "replay: no such corpus file or directory: %s\n", root.c_str());
      std::exit(2);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  return inputs;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> roots(argv + 1, argv + argc);
  const std::vector<fs::path> inputs = InputsBelow(roots);
  if (inputs.empty()) {
    // A corpus that went missing must not pass as "nothing failed".
    std::fprintf(stderr, "replay: no inputs found\n");
    return 2;
  }
  for (const fs::path& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
    std::fflush(stderr);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::fprintf(stderr, "replay: %zu inputs passed\n", inputs.size());
  return 0;
}
