#include "libs/kube/rest_client.h"

#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/kube/api_error.h"
#include "libs/kube/frame_decoder.h"

namespace reverser::kube {
namespace {

using nlohmann::json;

constexpr char kJson[] = "application/json";
// A server-supplied delay longer than this is clamped.
constexpr absl::Duration kMaxRetryDelay = absl::Minutes(5);

class RealSleeper final : public Sleeper {
 public:
  bool SleepFor(absl::Duration duration, CancelToken* cancel) override {
    absl::Time deadline = absl::Now() + duration;
    while (absl::Now() < deadline) {
      if (cancel != nullptr && cancel->cancelled()) return false;
      absl::SleepFor(std::min(absl::Milliseconds(50), deadline - absl::Now()));
    }
    return cancel == nullptr || !cancel->cancelled();
  }
};

// Builds "?a=1&b=2" from non-empty parameters.
class Query {
 public:
  Query& Add(absl::string_view key, absl::string_view value) {
    if (value.empty()) return *this;
    absl::StrAppend(&text_, text_.empty() ? "?" : "&", key, "=", UrlEncode(value));
    return *this;
  }
  Query& Add(absl::string_view key, int64_t value) { return Add(key, absl::StrCat(value)); }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

// A response body as JSON. One nested deeper than `max_depth` is refused before parsing: nothing
// deeper than the API server itself accepts enters the process (recursive code downstream).
absl::StatusOr<json> ParseJsonBody(const HttpResponse& response, int64_t max_depth) {
  if (core::JsonNestingDepth(response.body, max_depth) > max_depth) {
    return absl::DataLossError(absl::StrCat("response nested deeper than ", max_depth, " levels"));
  }
  json parsed = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return absl::DataLossError(
        absl::StrCat("response is not JSON: ", response.body.substr(0, 200)));
  }
  return parsed;
}

void AddWriteQuery(Query& query, const WriteOptions& options) {
  query.Add("fieldManager", options.field_manager);
  if (options.dry_run) query.Add("dryRun", "All");
  query.Add("fieldValidation", options.field_validation);
}

std::string MetadataString(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  auto value = metadata->find(key);
  if (value == metadata->end() || !value->is_string()) return "";
  return value->get<std::string>();
}

}  // namespace

Sleeper& Sleeper::Real() {
  static RealSleeper sleeper;
  return sleeper;
}

absl::string_view PatchContentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
    case PatchType::kApply:
      return "application/apply-patch+yaml";  // a JSON body is valid YAML
  }
  return kJson;
}

std::string UrlEncode(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      constexpr char kHexDigits[] = "0123456789ABCDEF";
      out.push_back('%');
      out.push_back(kHexDigits[c >> 4]);
      out.push_back(kHexDigits[c & 0xF]);
    }
  }
  return out;
}

std::string ResourcePath(const core::GroupVersionResource& gvr, absl::string_view ns,
                         absl::string_view name, absl::string_view subresource) {
  std::string path = gvr.group.empty() ? absl::StrCat("/api/", gvr.version)
                                       : absl::StrCat("/apis/", gvr.group, "/", gvr.version);
  if (!ns.empty()) absl::StrAppend(&path, "/namespaces/", UrlEncode(ns));
  absl::StrAppend(&path, "/", gvr.resource);
  if (!name.empty()) absl::StrAppend(&path, "/", UrlEncode(name));
  if (!subresource.empty()) absl::StrAppend(&path, "/", subresource);
  return path;
}

RestClient::RestClient(std::shared_ptr<HttpTransport> transport, RestClientOptions options)
    : transport_(std::move(transport)),
      options_(options),
      sleeper_(options.sleeper != nullptr ? options.sleeper : &Sleeper::Real()) {}

absl::StatusOr<HttpResponse> RestClient::Do(HttpRequest request, CancelToken* cancel) {
  if (request.timeout == absl::ZeroDuration()) request.timeout = options_.request_timeout;
  for (int attempt = 0;; ++attempt) {
    ASSIGN_OR_RETURN(HttpResponse response, transport_->Send(request));
    if (response.status >= 200 && response.status < 300) return response;
    ApiError error = ParseApiError(response.status, response.body, response.Header("Retry-After"));
    // 429 is always safe to retry (the request was not processed); 5xx only when the server
    // says when (Retry-After), like client-go.
    bool retry = error.code == 429 || (error.code >= 500 && error.retry_after.has_value());
    if (!retry || attempt >= options_.max_retries) return ToStatus(error);
    absl::Duration delay = std::min(error.retry_after.value_or(absl::Seconds(1)), kMaxRetryDelay);
    if (!sleeper_->SleepFor(delay, cancel)) return absl::CancelledError("request cancelled");
  }
}

absl::StatusOr<json> RestClient::DoJson(HttpRequest request) {
  request.headers.emplace_back("Accept", kJson);
  ASSIGN_OR_RETURN(HttpResponse response, Do(std::move(request)));
  return ParseJsonBody(response, options_.max_object_depth);
}

absl::StatusOr<HttpResponse> RestClient::GetRaw(const std::string& path, HeaderList headers) {
  HttpRequest request;
  request.path = path;
  request.headers = std::move(headers);
  return Do(std::move(request));
}

absl::StatusOr<json> RestClient::Get(const core::GroupVersionResource& gvr, absl::string_view ns,
                                     absl::string_view name, absl::string_view subresource) {
  if (name.empty()) return absl::InvalidArgumentError("get: empty name");
  HttpRequest request;
  request.path = ResourcePath(gvr, ns, name, subresource);
  return DoJson(std::move(request));
}

absl::StatusOr<ListPage> RestClient::List(const core::GroupVersionResource& gvr,
                                          absl::string_view ns, const ListOptions& options) {
  Query query;
  query.Add("labelSelector", options.label_selector)
      .Add("fieldSelector", options.field_selector)
      .Add("continue", options.continue_token)
      .Add("resourceVersion", options.resource_version)
      .Add("resourceVersionMatch", options.resource_version_match);
  if (options.limit > 0) query.Add("limit", options.limit);
  HttpRequest request;
  request.path = ResourcePath(gvr, ns) + query.str();
  request.headers.emplace_back("Accept", kJson);
  ASSIGN_OR_RETURN(HttpResponse response, Do(std::move(request)));
  // The list and its items array add two levels. A deeper body holds items that are too deep
  // (or is not a list at all): parsed without recursion, those items are refused one by one.
  const int64_t max_object_depth = options_.max_object_depth;
  const bool within_depth =
      core::JsonNestingDepth(response.body, max_object_depth + 2) <= max_object_depth + 2;
  json list = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (list.is_discarded()) {
    return absl::DataLossError(
        absl::StrCat("response is not JSON: ", response.body.substr(0, 200)));
  }
  if (!list.is_object()) return absl::DataLossError("list response is not an object");
  ListPage page;
  if (auto it = list.find("kind"); it != list.end() && it->is_string()) page.kind = *it;
  if (auto it = list.find("apiVersion"); it != list.end() && it->is_string()) {
    page.api_version = *it;
  }
  if (auto meta = list.find("metadata"); meta != list.end() && meta->is_object()) {
    if (auto it = meta->find("resourceVersion"); it != meta->end() && it->is_string()) {
      page.resource_version = *it;
    }
    if (auto it = meta->find("continue"); it != meta->end() && it->is_string()) {
      page.continue_token = *it;
    }
    if (auto it = meta->find("remainingItemCount"); it != meta->end() && it->is_number_integer()) {
      page.remaining_item_count = it->get<int64_t>();
    }
  }
  auto items = list.find("items");
  if (items != list.end() && items->is_array()) {
    page.items.reserve(items->size());
    for (json& item : *items) {
      if (!within_depth && NestingDepth(item, max_object_depth) > max_object_depth) {
        page.refused.push_back(RefuseTooDeep(item, max_object_depth));
        continue;
      }
      page.items.push_back(std::move(item));
    }
  } else if (items != list.end() && !items->is_null()) {
    return absl::DataLossError("list \"items\" is not an array");
  }
  if (!within_depth && page.refused.empty()) {
    return absl::DataLossError(
        absl::StrCat("list response nested deeper than ", max_object_depth + 2, " levels"));
  }
  return page;
}

absl::StatusOr<std::string> RestClient::ListEach(const core::GroupVersionResource& gvr,
                                                 absl::string_view ns, const ListOptions& options,
                                                 const std::function<absl::Status(json)>& on_item,
                                                 CancelToken* cancel,
                                                 std::vector<RefusedObject>* refused) {
  ListOptions page_options = options;
  std::string list_rv;
  for (bool first = true;; first = false) {
    if (cancel != nullptr && cancel->cancelled()) return absl::CancelledError("list cancelled");
    ASSIGN_OR_RETURN(ListPage page, List(gvr, ns, page_options));
    // All pages share the first page's RV.
    if (first) list_rv = page.resource_version;
    if (refused != nullptr) {
      for (RefusedObject& object : page.refused) refused->push_back(std::move(object));
    }
    for (json& item : page.items) RETURN_IF_ERROR(on_item(std::move(item)));
    if (page.continue_token.empty()) return list_rv;
    page_options.continue_token = page.continue_token;
    // The continue token pins the RV; the server rejects both together.
    page_options.resource_version.clear();
    page_options.resource_version_match.clear();
  }
}

absl::StatusOr<ListPage> RestClient::ListAll(const core::GroupVersionResource& gvr,
                                             absl::string_view ns, ListOptions options) {
  ListPage all;
  ASSIGN_OR_RETURN(all.resource_version, ListEach(
                                             gvr, ns, options,
                                             [&](json item) {
                                               all.items.push_back(std::move(item));
                                               return absl::OkStatus();
                                             },
                                             nullptr, &all.refused));
  return all;
}

absl::StatusOr<json> RestClient::Create(const core::GroupVersionResource& gvr, absl::string_view ns,
                                        const json& object, const WriteOptions& options) {
  Query query;
  AddWriteQuery(query, options);
  HttpRequest request;
  request.method = "POST";
  request.path = ResourcePath(gvr, ns) + query.str();
  request.headers.emplace_back("Content-Type", kJson);
  request.body = object.dump();
  return DoJson(std::move(request));
}

absl::StatusOr<json> RestClient::Update(const core::GroupVersionResource& gvr, absl::string_view ns,
                                        const json& object, const WriteOptions& options,
                                        absl::string_view subresource) {
  std::string name = MetadataString(object, "name");
  if (name.empty()) return absl::InvalidArgumentError("update: object has no metadata.name");
  Query query;
  AddWriteQuery(query, options);
  HttpRequest request;
  request.method = "PUT";
  request.path = ResourcePath(gvr, ns, name, subresource) + query.str();
  request.headers.emplace_back("Content-Type", kJson);
  request.body = object.dump();
  return DoJson(std::move(request));
}

absl::StatusOr<json> RestClient::Patch(const core::GroupVersionResource& gvr, absl::string_view ns,
                                       absl::string_view name, PatchType type, const json& patch,
                                       const PatchOptions& options) {
  if (name.empty()) return absl::InvalidArgumentError("patch: empty name");
  if (type == PatchType::kApply && options.field_manager.empty()) {
    return absl::InvalidArgumentError("apply patch needs a field manager");
  }
  if (type == PatchType::kJson && !patch.is_array()) {
    return absl::InvalidArgumentError("a JSON patch must be an array of operations");
  }
  Query query;
  query.Add("fieldManager", options.field_manager);
  if (options.dry_run) query.Add("dryRun", "All");
  if (type == PatchType::kApply) query.Add("force", options.force ? "true" : "false");
  HttpRequest request;
  request.method = "PATCH";
  request.path = ResourcePath(gvr, ns, name, options.subresource) + query.str();
  request.headers.emplace_back("Content-Type", std::string(PatchContentType(type)));
  request.body = patch.dump();
  return DoJson(std::move(request));
}

absl::StatusOr<json> RestClient::Delete(const core::GroupVersionResource& gvr, absl::string_view ns,
                                        absl::string_view name, const DeleteOptions& options) {
  if (name.empty()) return absl::InvalidArgumentError("delete: empty name");
  json body = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (!options.propagation_policy.empty()) body["propagationPolicy"] = options.propagation_policy;
  if (options.grace_period_seconds) body["gracePeriodSeconds"] = *options.grace_period_seconds;
  if (!options.precondition_uid.empty()) body["preconditions"]["uid"] = options.precondition_uid;
  if (!options.precondition_resource_version.empty()) {
    body["preconditions"]["resourceVersion"] = options.precondition_resource_version;
  }
  if (options.dry_run) body["dryRun"] = json::array({"All"});
  HttpRequest request;
  request.method = "DELETE";
  request.path = ResourcePath(gvr, ns, name);
  request.headers.emplace_back("Content-Type", kJson);
  request.body = body.dump();
  return DoJson(std::move(request));
}

absl::Status RestClient::Watch(const core::GroupVersionResource& gvr, absl::string_view ns,
                               const WatchOptions& options,
                               const std::function<absl::Status(WatchEvent)>& on_event,
                               CancelToken* cancel) {
  Query query;
  query.Add("watch", "true")
      .Add("labelSelector", options.label_selector)
      .Add("fieldSelector", options.field_selector)
      .Add("resourceVersion", options.resource_version);
  if (options.allow_bookmarks) query.Add("allowWatchBookmarks", "true");
  if (options.send_initial_events) {
    query.Add("sendInitialEvents", "true").Add("resourceVersionMatch", "NotOlderThan");
  }
  if (options.timeout_seconds) query.Add("timeoutSeconds", *options.timeout_seconds);
  HttpRequest request;
  request.path = ResourcePath(gvr, ns) + query.str();
  request.headers.emplace_back("Accept", kJson);
  // The server closes the stream at timeoutSeconds; allow a margin before calling it dead.
  request.timeout =
      options.timeout_seconds ? absl::Seconds(*options.timeout_seconds + 30) : absl::Minutes(61);

  FrameDecoder decoder;
  WatchEventDecoder event_decoder(options.raw_objects, options_.max_object_depth);
  absl::Status consumer_status;
  auto on_frame = [&](absl::string_view frame) -> absl::Status {
    ASSIGN_OR_RETURN(WatchEvent event, event_decoder.Decode(frame, decoder.frame_depth()));
    return on_event(std::move(event));
  };
  absl::StatusOr<HttpResponse> response = transport_->Stream(
      request,
      [&](absl::string_view chunk) {
        consumer_status = decoder.Feed(chunk, on_frame);
        return consumer_status.ok();
      },
      cancel);
  if (!consumer_status.ok()) return consumer_status;
  if (!response.ok()) return response.status();
  if (response->status < 200 || response->status >= 300) {
    return ToStatus(
        ParseApiError(response->status, response->body, response->Header("Retry-After")));
  }
  // A stream cut inside a frame is a dropped connection, not a clean end.
  if (absl::Status finish = decoder.Finish(); !finish.ok()) {
    return absl::UnavailableError(finish.message());
  }
  return absl::OkStatus();
}

}  // namespace reverser::kube
