#pragma once

// Test-only: reads files of the shared Kubernetes test data by their path below testdata/
// (e.g. "k8s/handmade/status/409-conflict.json"). Uses $REVERSER_SHARED_DIR/testdata when set,
// otherwise the copies in libs/kube/testdata (see its README).

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace reverser::kube::testing {

inline std::string TestDataPath(const std::string& relative) {
  if (const char* shared = std::getenv("REVERSER_SHARED_DIR"); shared != nullptr && *shared) {
    return std::string(shared) + "/testdata/" + relative;
  }
  return "libs/kube/testdata/" + relative;
}

// The file's bytes; "" if it cannot be read (tests assert non-empty).
inline std::string ReadTestData(const std::string& relative) {
  std::ifstream in(TestDataPath(relative), std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace reverser::kube::testing
