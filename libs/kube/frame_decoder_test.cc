#include "libs/kube/frame_decoder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "libs/kube/watch_event.h"
#include "tests/fixtures/runfiles.h"

namespace reverser::kube {
namespace {

using reverser::testing::ReadTestdata;

// Feeds `body` cut at the given offsets and returns the frames, failing the test on errors.
std::vector<std::string> DecodeInPieces(absl::string_view body, const std::vector<size_t>& cuts) {
  FrameDecoder decoder;
  std::vector<std::string> frames;
  auto collect = [&](absl::string_view frame) {
    frames.emplace_back(frame);
    return absl::OkStatus();
  };
  size_t start = 0;
  for (size_t cut : cuts) {
    EXPECT_TRUE(decoder.Feed(body.substr(start, cut - start), collect).ok());
    start = cut;
  }
  EXPECT_TRUE(decoder.Feed(body.substr(start), collect).ok());
  EXPECT_TRUE(decoder.Finish().ok());
  return frames;
}

std::vector<std::string> Lines(absl::string_view body) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find('\n', start);
    if (end == absl::string_view::npos) end = body.size();
    if (end > start) lines.emplace_back(body.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

TEST(FrameDecoderTest, SplitAtEveryByteBoundaryGivesTheSameFrames) {
  for (const char* file : {"k8s/handmade/watch/watchlist-sendInitialEvents.ndjson",
                           "k8s/objects/kubeclient-2015-2018/watch_stream.json"}) {
    std::string body = ReadTestdata(file);
    ASSERT_FALSE(body.empty()) << file;
    std::vector<std::string> expected = Lines(body);
    ASSERT_GT(expected.size(), 1u);
    for (size_t cut = 0; cut <= body.size(); ++cut) {
      ASSERT_EQ(DecodeInPieces(body, {cut}), expected) << file << " cut at " << cut;
    }
    // And every byte on its own.
    std::vector<size_t> every_byte;
    for (size_t i = 1; i < body.size(); ++i) every_byte.push_back(i);
    EXPECT_EQ(DecodeInPieces(body, every_byte), expected) << file;
    for (const std::string& frame : expected) EXPECT_TRUE(ParseWatchEvent(frame).ok()) << frame;
  }
}

TEST(FrameDecoderTest, BracesAndQuotesInsideStringsDoNotConfuseIt) {
  std::string body = R"({"type":"ADDED","object":{"data":{"k":"}{][\"\\","e":"\\\\"}}})"
                     "\n"
                     R"({"type":"DELETED","object":{"data":{"k":"\"}"}}})";
  for (size_t cut = 0; cut <= body.size(); ++cut) {
    std::vector<std::string> frames = DecodeInPieces(body, {cut});
    ASSERT_EQ(frames.size(), 2u) << cut;
    auto first = ParseWatchEvent(frames[0]);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->object["data"]["k"], "}{][\"\\");
  }
}

TEST(FrameDecoderTest, ConcatenatedFramesWithoutNewlines) {
  EXPECT_EQ(DecodeInPieces(R"({"a":1}{"b":[2]}  {"c":{}})", {}),
            (std::vector<std::string>{R"({"a":1})", R"({"b":[2]})", R"({"c":{}})"}));
}

TEST(FrameDecoderTest, GarbageBetweenFramesIsAnError) {
  FrameDecoder decoder;
  int frames = 0;
  auto count = [&](absl::string_view) {
    ++frames;
    return absl::OkStatus();
  };
  EXPECT_TRUE(decoder.Feed("{\"a\":1}\n", count).ok());
  absl::Status status = decoder.Feed("oops{\"b\":2}\n", count);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(frames, 1);
  // Stays failed.
  EXPECT_FALSE(decoder.Feed("{\"c\":3}", count).ok());
  EXPECT_FALSE(decoder.Finish().ok());
}

TEST(FrameDecoderTest, TruncatedStreamIsReportedByFinish) {
  FrameDecoder decoder;
  auto ignore = [](absl::string_view) { return absl::OkStatus(); };
  EXPECT_TRUE(decoder.Feed("{\"type\":\"ADDED\",\"object\":{\"x\":\"}", ignore).ok());
  EXPECT_EQ(decoder.Finish().code(), absl::StatusCode::kDataLoss);
}

TEST(FrameDecoderTest, BalancedButInvalidJsonIsRejectedByTheEventParser) {
  std::vector<std::string> frames = DecodeInPieces("{\"type\":ADDED,}\n{}\n", {});
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(ParseWatchEvent(frames[0]).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(ParseWatchEvent(frames[1]).ok());  // no type, no object
  EXPECT_FALSE(ParseWatchEvent(R"({"type":"SNAPSHOT","object":{}})").ok());
  EXPECT_FALSE(ParseWatchEvent(R"({"type":"ADDED","object":"str"})").ok());
}

// The raw-object decoder gives what ParseWatchEvent gives, the object as its JSON text.
void ExpectRawDecodeAgrees(WatchEventDecoder& raw, absl::string_view frame) {
  absl::StatusOr<WatchEvent> parsed = ParseWatchEvent(frame);
  absl::StatusOr<WatchEvent> decoded = raw.Decode(frame);
  ASSERT_EQ(decoded.status().code(), parsed.status().code()) << frame;
  if (!parsed.ok()) {
    EXPECT_EQ(decoded.status().message(), parsed.status().message());
    return;
  }
  EXPECT_EQ(decoded->type, parsed->type) << frame;
  EXPECT_EQ(decoded->resource_version, parsed->resource_version) << frame;
  EXPECT_EQ(decoded->resource_version, ResourceVersionOf(parsed->object)) << frame;
  if (parsed->type == WatchEventType::kBookmark || parsed->type == WatchEventType::kError) {
    EXPECT_EQ(decoded->object, parsed->object) << frame;  // always parsed
    EXPECT_TRUE(decoded->object_json.empty());
  } else {
    EXPECT_TRUE(decoded->object.is_null());
    EXPECT_EQ(nlohmann::json::parse(decoded->object_json), parsed->object) << frame;
  }
}

TEST(WatchEventDecoderTest, RawObjectsAgreeWithParseWatchEventOnEveryCapturedFrame) {
  WatchEventDecoder raw(/*raw_objects=*/true);
  int frames = 0;
  for (const char* file : {"k8s/handmade/watch/watchlist-sendInitialEvents.ndjson",
                           "k8s/objects/kubeclient-2015-2018/watch_stream.json",
                           "k8s/handmade/watch/watch-error-410-expired.ndjson"}) {
    for (const std::string& frame : DecodeInPieces(ReadTestdata(file), {})) {
      ExpectRawDecodeAgrees(raw, frame);
      ++frames;
    }
  }
  EXPECT_GT(frames, 5);
}

TEST(WatchEventDecoderTest, RawObjectsKeepTheServersBytesAndRejectWhatParseWatchEventRejects) {
  WatchEventDecoder raw(/*raw_objects=*/true);
  const std::string object =
      R"({"metadata":{"name":"a","resourceVersion":"7"},"data":{"k":"}{][\"\\\u00e9"}})";
  absl::StatusOr<WatchEvent> event =
      raw.Decode(absl::StrCat(R"({"object":)", object, R"(,"type":"MODIFIED"})"));
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->object_json, object);
  EXPECT_EQ(event->resource_version, "7");
  for (absl::string_view frame : {
           R"({"type":ADDED,})",
           R"({})",
           R"({"type":"SNAPSHOT","object":{}})",
           R"({"type":"ADDED","object":"str"})",
           R"({"type":1,"object":{}})",
           R"({"type":"ADDED","object":{"metadata":{"resourceVersion":5}}})",
           "{\"type\":\"ADDED\",\"object\":{\"a\":\"\xff\"}}",
           R"([1,2])",
           R"({"type":"ADDED")",
           R"({"type":"DELETED","object":{},"extra":[1,{"x":null}]})",
           // The RV is read inside the object pass; members before and after must not disturb it.
           R"({"object":{"data":{"a":[1,{"b":2}]},"metadata":{"name":"x","resourceVersion":"9"}},)"
           R"("extra":{"k":[1,2]},"type":"ADDED"})",
           R"({"type":"MODIFIED","object":{"metadata":{"resourceVersion":"10","labels":{"a":"b"}},)"
           R"("spec":{"x":{"resourceVersion":"not this one"}}}})",
       }) {
    ExpectRawDecodeAgrees(raw, frame);
  }
}

TEST(FrameDecoderTest, CallbackErrorStopsDecoding) {
  FrameDecoder decoder;
  absl::Status status =
      decoder.Feed("{}{}", [](absl::string_view) { return absl::CancelledError("stop"); });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
}

TEST(FrameDecoderTest, HugeFrameAcrossManyChunks) {
  // One 8 MiB ConfigMap value arriving in 16 KiB chunks.
  std::string value(8 << 20, 'x');
  std::string body = absl::StrCat(R"({"type":"ADDED","object":{"data":{"big":")", value,
                                  "\"}}}\n{\"type\":\"DELETED\",\"object\":{}}\n");
  FrameDecoder decoder;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < body.size(); i += 16 << 10) {
    ASSERT_TRUE(decoder
                    .Feed(absl::string_view(body).substr(i, 16 << 10),
                          [&](absl::string_view frame) {
                            sizes.push_back(frame.size());
                            return absl::OkStatus();
                          })
                    .ok());
  }
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_GT(sizes[0], value.size());
  EXPECT_EQ(decoder.buffered_bytes(), 0u);
}

TEST(FrameDecoderTest, FrameOverTheLimitIsRejected) {
  FrameDecoder decoder(/*max_frame_bytes=*/1024);
  auto ignore = [](absl::string_view) { return absl::OkStatus(); };
  std::string big = absl::StrCat("{\"v\":\"", std::string(600, 'a'));
  EXPECT_TRUE(decoder.Feed(big, ignore).ok());
  EXPECT_EQ(decoder.Feed(big, ignore).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(decoder.buffered_bytes(), 0u);
}

TEST(FrameDecoderTest, HundredThousandEventsNeverBufferMoreThanOneFrame) {
  FrameDecoder decoder;
  size_t frames = 0;
  size_t max_buffered = 0;
  std::string chunk;
  auto count = [&](absl::string_view) {
    ++frames;
    return absl::OkStatus();
  };
  for (int i = 0; i < 100'000; ++i) {
    absl::StrAppend(&chunk, R"({"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1",)",
                    R"("metadata":{"name":"cm-)", i,
                    R"(","namespace":"default","resourceVersion":")", i + 1,
                    R"("},"data":{"k":"v"}}})", "\n");
    // Flush in odd-sized chunks so frames straddle chunk boundaries.
    if (chunk.size() > 7001) {
      ASSERT_TRUE(decoder.Feed(absl::string_view(chunk).substr(0, 7001), count).ok());
      chunk.erase(0, 7001);
      max_buffered = std::max(max_buffered, decoder.buffered_bytes());
    }
  }
  ASSERT_TRUE(decoder.Feed(chunk, count).ok());
  ASSERT_TRUE(decoder.Finish().ok());
  EXPECT_EQ(frames, 100'000u);
  EXPECT_LT(max_buffered, 256u);  // one event is ~150 bytes
}

TEST(WatchEventTest, ParsesBookmarksAndTheInitialEventsEndMarker) {
  std::vector<std::string> frames =
      Lines(ReadTestdata("k8s/handmade/watch/watchlist-sendInitialEvents.ndjson"));
  ASSERT_EQ(frames.size(), 6u);
  auto end_marker = ParseWatchEvent(frames[2]);
  ASSERT_TRUE(end_marker.ok());
  EXPECT_EQ(end_marker->type, WatchEventType::kBookmark);
  EXPECT_TRUE(IsInitialEventsEndBookmark(*end_marker));
  EXPECT_EQ(ResourceVersionOf(end_marker->object), "1250");
  auto plain = ParseWatchEvent(frames[5]);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->type, WatchEventType::kBookmark);
  EXPECT_FALSE(IsInitialEventsEndBookmark(*plain));

  std::string pre134 = ReadTestdata("k8s/handmade/watch/bookmark-pre-1.34.json");
  auto old = ParseWatchEvent(pre134);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->type, WatchEventType::kBookmark);
  EXPECT_FALSE(ResourceVersionOf(old->object).empty());

  auto error = ParseWatchEvent(ReadTestdata("k8s/handmade/watch/watch-error-410-expired.ndjson"));
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(error->type, WatchEventType::kError);
}

}  // namespace
}  // namespace reverser::kube

namespace reverser::kube {
namespace {

// A watch frame whose object nests `depth` levels (the object itself is level 1).
std::string DeepFrame(const std::string& type, int depth) {
  std::string spec;
  for (int i = 2; i < depth; ++i) spec += R"({"a":)";
  spec += "{}";
  spec.append(depth > 2 ? depth - 2 : 0, '}');
  return absl::StrCat(R"({"type":")", type, R"(","object":{"kind":"Widget","apiVersion":"x/v1",)",
                      R"("metadata":{"name":"w","namespace":"team","uid":"u-1",)",
                      R"("resourceVersion":"42"},"spec":)", spec, "}}");
}

TEST(WatchEventDecoderTest, AnObjectDeeperThanTheApiServerAllowsIsRefusedNotAnError) {
  const std::string deepest = DeepFrame("MODIFIED", core::kApiObjectMaxDepth);
  const std::string too_deep = DeepFrame("MODIFIED", core::kApiObjectMaxDepth + 1);
  ASSERT_EQ(core::JsonNestingDepth(deepest), core::kApiObjectMaxDepth + 1);  // the frame adds one
  for (bool raw_objects : {true, false}) {
    WatchEventDecoder decoder(raw_objects);
    absl::StatusOr<WatchEvent> accepted = decoder.Decode(deepest);
    ASSERT_TRUE(accepted.ok()) << accepted.status();
    EXPECT_FALSE(accepted->refused.has_value());
    EXPECT_EQ(accepted->resource_version, "42");
    EXPECT_TRUE(raw_objects ? !accepted->object_json.empty() : accepted->object.is_object());

    absl::StatusOr<WatchEvent> refused = decoder.Decode(too_deep);
    ASSERT_TRUE(refused.ok()) << refused.status();
    ASSERT_TRUE(refused->refused.has_value());
    EXPECT_EQ(refused->type, WatchEventType::kModified);
    EXPECT_EQ(refused->resource_version, "42");  // the watch can move past it
    EXPECT_TRUE(refused->object.is_null());
    EXPECT_TRUE(refused->object_json.empty());
    const RefusedObject& object = *refused->refused;
    EXPECT_EQ(object.reason, "too_deep");
    EXPECT_EQ(object.kind, "Widget");
    EXPECT_EQ(object.api_version, "x/v1");
    EXPECT_EQ(object.namespace_, "team");
    EXPECT_EQ(object.name, "w");
    EXPECT_EQ(object.uid, "u-1");
    EXPECT_NE(object.message.find("deeper than 10000 levels"), std::string::npos);
  }
  // ParseWatchEvent applies the same limit.
  EXPECT_FALSE(ParseWatchEvent(deepest)->refused.has_value());
  EXPECT_TRUE(ParseWatchEvent(too_deep)->refused.has_value());
}

TEST(WatchEventDecoderTest, TheLimitIsConfigurableAndTheFrameDecodersDepthIsTheSame) {
  WatchEventDecoder decoder(/*raw_objects=*/true, /*max_object_depth=*/8);
  FrameDecoder frames;
  std::vector<bool> refused;
  const std::string body = DeepFrame("ADDED", 8) + "\n" + DeepFrame("ADDED", 9) + "\n";
  ASSERT_TRUE(frames
                  .Feed(body,
                        [&](absl::string_view frame) {
                          EXPECT_EQ(frames.frame_depth(), core::JsonNestingDepth(frame));
                          absl::StatusOr<WatchEvent> event =
                              decoder.Decode(frame, frames.frame_depth());
                          EXPECT_TRUE(event.ok()) << event.status();
                          if (event.ok()) refused.push_back(event->refused.has_value());
                          return absl::OkStatus();
                        })
                  .ok());
  EXPECT_EQ(refused, (std::vector<bool>{false, true}));
}

TEST(WatchEventDecoderTest, ADeepFrameWithoutAKnownTypeIsAnError) {
  WatchEventDecoder decoder(/*raw_objects=*/true, /*max_object_depth=*/4);
  std::string frame = DeepFrame("SNAPSHOT", 9);
  EXPECT_FALSE(decoder.Decode(frame).ok());
  EXPECT_FALSE(decoder.Decode(R"({"object":{"a":[[[[[[[1]]]]]]]}})").ok());
}

}  // namespace
}  // namespace reverser::kube
