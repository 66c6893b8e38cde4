#pragma once

// Incremental splitter for a watch response body.
//
// A watch body is a sequence of JSON objects, each followed by "\n", but the HTTP chunks carry
// arbitrary slices of it: a chunk may end inside a string, inside an escape, or hold many
// events. The decoder scans each byte once, keeps only the unfinished frame, and hands every
// complete top-level object to the caller. It does not rely on the newline (whitespace between
// frames is skipped), so it also reads concatenated JSON.

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace reverser::kube {

class FrameDecoder {
 public:
  // Called with each complete frame (the raw bytes of one JSON object). Returning an error
  // stops decoding; Feed() returns that error.
  using FrameCallback = std::function<absl::Status(absl::string_view frame)>;

  static constexpr size_t kDefaultMaxFrameBytes = 64 << 20;

  explicit FrameDecoder(size_t max_frame_bytes = kDefaultMaxFrameBytes)
      : max_frame_bytes_(max_frame_bytes) {}

  // Consumes the next slice of the body. After an error the decoder stays failed.
  absl::Status Feed(absl::string_view chunk, const FrameCallback& on_frame);

  // Call at the end of the body: an error if a frame was cut off.
  absl::Status Finish() const;

  // Bytes held for the unfinished frame (what the decoder buffers at most is one frame).
  size_t buffered_bytes() const { return pending_.size(); }

  // The deepest nesting of the frame being delivered (valid inside a FrameCallback): the same
  // count core::JsonNestingDepth gives, measured on the way, so decoders need not scan again.
  int frame_depth() const { return frame_depth_; }

 private:
  absl::Status Fail(absl::Status status);

  size_t max_frame_bytes_;
  std::string pending_;  // bytes of the current, unfinished frame
  int depth_ = 0;        // nesting depth of {} and [] inside the frame
  int frame_depth_ = 0;  // the deepest depth_ of the current frame
  bool in_string_ = false;
  bool escaped_ = false;
  absl::Status failed_;
};

}  // namespace reverser::kube
