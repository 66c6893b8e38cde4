// A watch response body (libs/kube) is untrusted bytes from the API server or anything posing as
// it. The body is split into frames the way the REST client feeds it (whole, and in small HTTP
// chunks: both must give the same frames), and each frame is decoded in both modes the client
// offers: parsed (nlohmann objects) and raw (the object's JSON text kept). Where both modes
// accept a frame they must agree.

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "libs/kube/frame_decoder.h"
#include "libs/kube/watch_event.h"
#include "nlohmann/json.hpp"

namespace reverser::fuzz {
namespace {

struct Split {
  std::vector<std::string> frames;
  bool ok = false;
};

Split SplitBody(absl::string_view body, size_t chunk_size, size_t max_frame_bytes) {
  kube::FrameDecoder decoder(max_frame_bytes);
  Split split;
  auto collect = [&](absl::string_view frame) {
    split.frames.emplace_back(frame);
    return absl::OkStatus();
  };
  for (size_t at = 0; at < body.size(); at += chunk_size) {
    if (!decoder.Feed(body.substr(at, chunk_size), collect).ok()) return split;
    FUZZ_CHECK(decoder.buffered_bytes() <= max_frame_bytes);
  }
  split.ok = decoder.Finish().ok();
  return split;
}

// True when some JSON object in `text` names a member twice. The two modes then read different
// occurrences for the resourceVersion (parsed: the last, raw: the first); the API server never
// sends such frames (Go's encoder cannot write them), so only that comparison is skipped.
bool HasDuplicateMembers(absl::string_view text) {
  struct Sax : nlohmann::json_sax<nlohmann::json> {
    std::vector<std::vector<std::string>> open;
    bool duplicate = false;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override {
      open.emplace_back();
      return true;
    }
    bool key(string_t& name) override {
      for (const std::string& seen : open.back()) duplicate |= seen == name;
      open.back().push_back(name);
      return true;
    }
    bool end_object() override {
      open.pop_back();
      return true;
    }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
      return false;
    }
  } sax;
  nlohmann::json::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json,
                            /*strict=*/true);
  return sax.duplicate;
}

void CheckAgree(absl::string_view frame, const kube::WatchEvent& parsed,
                const kube::WatchEvent& raw) {
  FUZZ_CHECK(parsed.type == raw.type);
  if (!HasDuplicateMembers(frame)) FUZZ_CHECK(parsed.resource_version == raw.resource_version);
  if (raw.object.is_null() && raw.object_json.empty()) {
    // Neither kept: the object was refused (nested too deep); parsed mode refuses it as well.
    FUZZ_CHECK(parsed.object.is_null());
    return;
  }
  if (raw.object.is_null()) {
    // Raw mode kept the text: it must hold the object parsed mode built.
    const nlohmann::json object = nlohmann::json::parse(raw.object_json, nullptr, false);
    FUZZ_CHECK(!object.is_discarded());
    FUZZ_CHECK(object == parsed.object);
  } else {
    FUZZ_CHECK(raw.object == parsed.object);
  }
}

}  // namespace
}  // namespace reverser::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reverser;
  const absl::string_view body = fuzz::AsText(data, size);
  constexpr size_t kNoLimit = kube::FrameDecoder::kDefaultMaxFrameBytes;
  const fuzz::Split whole = fuzz::SplitBody(body, body.size() + 1, kNoLimit);
  // HTTP chunks end anywhere: inside a string, an escape or between frames.
  const fuzz::Split chunked = fuzz::SplitBody(body, 1 + size % 13, kNoLimit);
  FUZZ_CHECK(whole.frames == chunked.frames);
  FUZZ_CHECK(whole.ok == chunked.ok);
  // A small cap exercises the refusal of a frame that outgrows the buffer.
  fuzz::SplitBody(body, 1 + size % 7, 64);

  kube::WatchEventDecoder parsed_decoder(/*raw_objects=*/false);
  kube::WatchEventDecoder raw_decoder(/*raw_objects=*/true);
  for (const std::string& frame : whole.frames) {
    auto parsed = parsed_decoder.Decode(frame);
    auto raw = raw_decoder.Decode(frame);
    if (parsed.ok()) {
      kube::IsInitialEventsEndBookmark(*parsed);
      fuzz::ReadAll(parsed->resource_version);
    }
    if (parsed.ok() && raw.ok()) fuzz::CheckAgree(frame, *parsed, *raw);
  }
  return 0;
}
