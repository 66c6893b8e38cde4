#include "libs/kube/frame_decoder.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "libs/core/json_depth.h"

namespace reverser::kube {
namespace {

bool IsJsonWhitespace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

absl::Status FrameDecoder::Fail(absl::Status status) {
  failed_ = status;
  pending_.clear();
  return status;
}

absl::Status FrameDecoder::Feed(absl::string_view chunk, const FrameCallback& on_frame) {
  if (!failed_.ok()) return failed_;
  size_t frame_start = 0;  // where the part of the current frame inside `chunk` begins
  for (size_t i = 0; i < chunk.size(); ++i) {
    const char c = chunk[i];
    if (depth_ == 0) {
      // Between frames: only whitespace or the start of the next object is valid.
      if (IsJsonWhitespace(c)) continue;
      if (c != '{') {
        return Fail(absl::DataLossError(
            absl::StrCat("watch stream: expected '{' at the start of a frame, got byte 0x",
                         absl::Hex(static_cast<unsigned char>(c)))));
      }
      depth_ = 1;
      frame_depth_ = 1;
      frame_start = i;
      continue;
    }
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
        continue;
      }
      // Most of a watch body is string content: jump to the next quote or backslash (memchr
      // is vectorised) rather than looking at every byte.
      const size_t end = core::NextQuoteOrBackslash(chunk, i);
      if (end == chunk.size()) {
        i = end - 1;  // the string goes on in the next chunk
        continue;
      }
      i = end;
      if (chunk[i] == '\\') {
        escaped_ = true;
      } else {
        in_string_ = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string_ = true;
        break;
      case '{':
      case '[':
        if (++depth_ > frame_depth_) frame_depth_ = depth_;
        break;
      case '}':
      case ']':
        if (--depth_ == 0) {
          absl::string_view tail = chunk.substr(frame_start, i + 1 - frame_start);
          absl::Status status;
          if (pending_.empty()) {
            status = on_frame(tail);  // common case: the whole frame sits in this chunk
          } else {
            if (pending_.size() + tail.size() > max_frame_bytes_) {
              return Fail(absl::ResourceExhaustedError(
                  absl::StrCat("watch stream: frame larger than ", max_frame_bytes_, " bytes")));
            }
            pending_.append(tail.data(), tail.size());
            status = on_frame(pending_);
            pending_.clear();
          }
          if (!status.ok()) return Fail(status);
        }
        break;
      default:
        break;
    }
  }
  if (depth_ > 0) {
    // Keep the unfinished frame for the next chunk.
    absl::string_view tail = chunk.substr(frame_start);
    if (pending_.size() + tail.size() > max_frame_bytes_) {
      return Fail(absl::ResourceExhaustedError(
          absl::StrCat("watch stream: frame larger than ", max_frame_bytes_, " bytes")));
    }
    pending_.append(tail.data(), tail.size());
  }
  return absl::OkStatus();
}

absl::Status FrameDecoder::Finish() const {
  if (!failed_.ok()) return failed_;
  if (depth_ > 0) {
    return absl::DataLossError(
        absl::StrCat("watch stream ended inside a frame (", pending_.size(), " bytes pending)"));
  }
  return absl::OkStatus();
}

}  // namespace reverser::kube
