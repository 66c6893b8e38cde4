#include "libs/kube/watch_event.h"

#include "absl/strings/str_cat.h"

namespace reverser::kube {

using nlohmann::json;

absl::string_view WatchEventTypeName(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

std::optional<WatchEventType> WatchEventTypeNamed(absl::string_view name) {
  for (WatchEventType type :
       {WatchEventType::kAdded, WatchEventType::kModified, WatchEventType::kDeleted,
        WatchEventType::kBookmark, WatchEventType::kError}) {
    if (WatchEventTypeName(type) == name) return type;
  }
  return std::nullopt;
}

namespace {

std::string TooDeepMessage(int64_t max_object_depth) {
  return absl::StrCat("object nested deeper than ", max_object_depth,
                      " levels (the API server itself accepts at most ", core::kApiObjectMaxDepth,
                      ")");
}

// A frame whose object is nested too deeply: its type and identity are read without descending
// into the object (On-Demand skips what it is not asked for by counting brackets, at any depth).
// Without a readable known type the frame is an error, as any malformed frame is.
absl::StatusOr<WatchEvent> RefusedFrame(absl::string_view frame, int64_t max_object_depth) {
  namespace od = simdjson::ondemand;
  simdjson::padded_string padded(frame.data(), frame.size());
  od::parser parser;
  od::document doc;
  od::object root;
  RefusedObject refused;
  refused.reason = "too_deep";
  refused.message = TooDeepMessage(max_object_depth);
  std::string_view type_name;
  bool has_type = false;
  auto read_string = [](od::value value, std::string& out) {
    std::string_view text;
    if (!value.get_string().get(text)) out.assign(text.data(), text.size());
  };
  if (!parser.iterate(padded).get(doc) && !doc.get_object().get(root)) {
    for (auto field : root) {
      std::string_view key;
      if (field.unescaped_key().get(key)) break;
      if (key == "type") {
        if (field.value().get_string().get(type_name)) break;
        has_type = true;
      } else if (key == "object") {
        od::object object;
        if (field.value().get_object().get(object)) break;
        bool failed = false;
        for (auto member : object) {
          std::string_view name;
          if (member.unescaped_key().get(name)) {
            failed = true;
            break;
          }
          if (name == "kind") read_string(member.value(), refused.kind);
          if (name == "apiVersion") read_string(member.value(), refused.api_version);
          if (name != "metadata") continue;
          od::object metadata;
          if (member.value().get_object().get(metadata)) continue;
          for (auto meta : metadata) {
            std::string_view meta_key;
            if (meta.unescaped_key().get(meta_key)) break;
            if (meta_key == "name") read_string(meta.value(), refused.name);
            if (meta_key == "namespace") read_string(meta.value(), refused.namespace_);
            if (meta_key == "uid") read_string(meta.value(), refused.uid);
            if (meta_key == "resourceVersion") read_string(meta.value(), refused.resource_version);
          }
        }
        if (failed) break;
      }
    }
  }
  std::optional<WatchEventType> known =
      has_type ? WatchEventTypeNamed(absl::string_view(type_name.data(), type_name.size()))
               : std::nullopt;
  if (!known) {
    return absl::DataLossError(absl::StrCat("watch event nested deeper than ", max_object_depth + 1,
                                            " levels has no known \"type\""));
  }
  WatchEvent event;
  event.type = *known;
  event.resource_version = refused.resource_version;
  event.refused = std::move(refused);
  return event;
}

// ParseWatchEvent once the depth is known to be within the limit.
absl::StatusOr<WatchEvent> ParseFrame(absl::string_view frame) {
  json parsed = json::parse(frame.begin(), frame.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return absl::DataLossError(
        absl::StrCat("watch event is not a JSON object: ", frame.substr(0, 200)));
  }
  auto type = parsed.find("type");
  auto object = parsed.find("object");
  if (type == parsed.end() || !type->is_string()) {
    return absl::DataLossError("watch event has no \"type\"");
  }
  if (object == parsed.end() || !object->is_object()) {
    return absl::DataLossError("watch event has no \"object\"");
  }
  WatchEvent event;
  const std::string& name = type->get_ref<const std::string&>();
  std::optional<WatchEventType> known = WatchEventTypeNamed(name);
  if (!known) {
    return absl::DataLossError(absl::StrCat("unknown watch event type \"", name, "\""));
  }
  event.type = *known;
  event.object = std::move(*object);
  event.resource_version = ResourceVersionOf(event.object);
  return event;
}

}  // namespace

absl::StatusOr<WatchEvent> ParseWatchEvent(absl::string_view frame, int64_t max_object_depth) {
  // The frame wraps the object in one more level.
  if (core::JsonNestingDepth(frame, max_object_depth + 1) > max_object_depth + 1) {
    return RefusedFrame(frame, max_object_depth);
  }
  return ParseFrame(frame);
}

absl::StatusOr<WatchEvent> WatchEventDecoder::Decode(absl::string_view frame,
                                                     std::optional<int64_t> frame_depth) {
  const int64_t depth =
      frame_depth ? *frame_depth : core::JsonNestingDepth(frame, max_object_depth_ + 1);
  if (depth > max_object_depth_ + 1) return RefusedFrame(frame, max_object_depth_);
  if (!raw_objects_) return ParseFrame(frame);
  // Anything simdjson does not take (malformed JSON, odd shapes) goes through ParseWatchEvent,
  // which gives the error or the event exactly as before.
  auto fallback = [&] { return ParseFrame(frame); };
  padded_.assign(frame.data(), frame.size());
  padded_.reserve(frame.size() + simdjson::SIMDJSON_PADDING);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object root;
  if (parser_
          .iterate(simdjson::padded_string_view(padded_.data(), frame.size(), padded_.capacity()))
          .get(doc) ||
      doc.get_object().get(root)) {
    return fallback();
  }
  std::string_view type_name;
  std::string object_text;
  std::string rv;
  bool has_type = false, has_object = false;
  // Every member is visited, so a frame cut short inside the root object is noticed.
  for (auto field : root) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return fallback();
    if (key == "type") {
      if (field.value().get_string().get(type_name)) return fallback();
      has_type = true;
    } else if (key == "object") {
      simdjson::ondemand::object object;
      std::string_view raw;
      if (field.value().get_object().get(object) || object.raw_json().get(raw)) return fallback();
      object_text.assign(raw.data(), raw.size());
      has_object = true;
      // The RV: rewind the object and look it up (cheaper than parsing its text again).
      std::string_view rv_text;
      if (object.reset().error()) return fallback();
      if (!object.find_field_unordered("metadata")
               .find_field_unordered("resourceVersion")
               .get_string()
               .get(rv_text)) {
        rv.assign(rv_text.data(), rv_text.size());
      }
    }  // other members are skipped by the iteration itself
  }
  if (!has_type || !has_object) return fallback();
  WatchEvent event;
  std::optional<WatchEventType> known =
      WatchEventTypeNamed(absl::string_view(type_name.data(), type_name.size()));
  if (!known || *known == WatchEventType::kBookmark || *known == WatchEventType::kError) {
    return fallback();  // BOOKMARK and ERROR are small and read as JSON objects
  }
  event.type = *known;
  event.resource_version = std::move(rv);
  event.object_json = std::move(object_text);
  return event;
}

std::string ResourceVersionOf(const json& object) {
  if (!object.is_object()) return "";
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  auto rv = metadata->find("resourceVersion");
  if (rv == metadata->end() || !rv->is_string()) return "";
  return rv->get<std::string>();
}

RefusedObject RefuseTooDeep(const json& object, int64_t max_object_depth) {
  RefusedObject refused;
  refused.reason = "too_deep";
  refused.message = TooDeepMessage(max_object_depth);
  auto text = [](const json& parent, const char* key) -> std::string {
    if (!parent.is_object()) return "";
    auto it = parent.find(key);
    return it != parent.end() && it->is_string() ? it->get<std::string>() : "";
  };
  refused.kind = text(object, "kind");
  refused.api_version = text(object, "apiVersion");
  if (object.is_object()) {
    if (auto metadata = object.find("metadata"); metadata != object.end()) {
      refused.namespace_ = text(*metadata, "namespace");
      refused.name = text(*metadata, "name");
      refused.uid = text(*metadata, "uid");
      refused.resource_version = text(*metadata, "resourceVersion");
    }
  }
  return refused;
}

int64_t NestingDepth(const json& value, int64_t stop_above) {
  // Level by level, so a deep value costs heap, not stack.
  std::vector<const json*> level{&value};
  std::vector<const json*> next;
  int64_t depth = 0;
  while (!level.empty()) {
    next.clear();
    bool any_container = false;
    for (const json* v : level) {
      if (!v->is_structured()) continue;
      any_container = true;
      for (const json& child : *v) {
        if (child.is_structured()) next.push_back(&child);
      }
    }
    if (!any_container) break;
    if (++depth > stop_above) return stop_above + 1;
    level.swap(next);
  }
  return depth;
}

bool IsInitialEventsEndBookmark(const WatchEvent& event) {
  if (event.type != WatchEventType::kBookmark) return false;
  const json* annotations = nullptr;
  if (auto metadata = event.object.find("metadata");
      metadata != event.object.end() && metadata->is_object()) {
    if (auto it = metadata->find("annotations"); it != metadata->end() && it->is_object()) {
      annotations = &*it;
    }
  }
  if (annotations == nullptr) return false;
  auto marker = annotations->find(kInitialEventsEndAnnotation);
  return marker != annotations->end() && marker->is_string() && *marker == "true";
}

}  // namespace reverser::kube
