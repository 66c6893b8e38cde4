#pragma once

// Helpers shared by the fuzz targets in this folder.

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/string_view.h"

// A property every input must keep. Aborting is how a target reports a finding: libFuzzer saves
// the input as a crash, and replay_main fails the test.
#define FUZZ_CHECK(condition)                                                                  \
  do {                                                                                         \
    if (!(condition)) {                                                                        \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s (%s:%d)\n", #condition, __FILE__, __LINE__); \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

namespace reverser::fuzz {

// Reads every byte of `text`, so AddressSanitizer checks that a view still points into live
// memory (decoders hand out views into buffers they own).
inline void ReadAll(absl::string_view text) {
  static volatile uint8_t sink;
  uint8_t sum = 0;
  for (char c : text) sum += static_cast<uint8_t>(c);
  sink = sink + sum;
}

inline absl::string_view AsText(const uint8_t* data, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

}  // namespace reverser::fuzz
