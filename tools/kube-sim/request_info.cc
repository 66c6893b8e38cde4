#include "tools/kube-sim/request_info.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace reverser::kubesim {

std::optional<std::string> QueryValue(const std::multimap<std::string, std::string>& params,
                                      const std::string& key) {
  auto it = params.find(key);
  if (it == params.end()) return std::nullopt;
  return it->second;
}

bool QueryBool(const std::multimap<std::string, std::string>& params, const std::string& key) {
  auto v = QueryValue(params, key);
  if (!v) return false;
  std::string lower = absl::AsciiStrToLower(*v);
  return !(lower == "0" || lower == "false");
}

RequestInfo ParseRequestInfo(const std::string& method, const std::string& path,
                             const std::multimap<std::string, std::string>& params) {
  RequestInfo info;
  info.verb = absl::AsciiStrToLower(method);
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  if (parts.empty() || (parts[0] != "api" && parts[0] != "apis")) return info;
  info.api_prefix = parts[0];
  size_t i = 1;
  if (info.api_prefix == "apis") {
    if (parts.size() < 3) return info;  // /apis, /apis/{g}: discovery
    info.group = parts[1];
    info.version = parts[2];
    i = 3;
  } else {
    if (parts.size() < 2) return info;
    info.version = parts[1];
    i = 2;
  }
  if (i >= parts.size()) return info;  // /api/v1, /apis/g/v: discovery
  info.is_resource = true;
  bool legacy_watch = false;
  if (parts[i] == "watch") {  // deprecated /watch/ path form
    legacy_watch = true;
    ++i;
  }
  std::vector<std::string> rest(parts.begin() + i, parts.end());
  if (rest.size() >= 2 && rest[0] == "namespaces") {
    if (rest.size() == 2 || (rest.size() == 3 && (rest[2] == "status" || rest[2] == "finalize"))) {
      // The namespace object itself (and its status/finalize subresources).
      info.resource = "namespaces";
      info.name = rest[1];
      if (rest.size() == 3) info.subresource = rest[2];
      rest.clear();
    } else {
      info.namespace_ = rest[1];
      rest.erase(rest.begin(), rest.begin() + 2);
    }
  }
  if (!rest.empty()) info.resource = rest[0];
  if (rest.size() >= 2) info.name = rest[1];
  if (rest.size() >= 3) info.subresource = rest[2];
  if (rest.size() > 3) info.is_resource = false;  // unknown deep path: 404
  if (method == "GET" || method == "HEAD") {
    if (legacy_watch || QueryBool(params, "watch")) {
      info.verb = "watch";
    } else {
      info.verb = info.name.empty() ? "list" : "get";
    }
  } else if (method == "POST") {
    info.verb = "create";
  } else if (method == "PUT") {
    info.verb = "update";
  } else if (method == "PATCH") {
    info.verb = "patch";
  } else if (method == "DELETE") {
    info.verb = info.name.empty() ? "deletecollection" : "delete";
  }
  return info;
}

}  // namespace reverser::kubesim
