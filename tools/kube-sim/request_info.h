#pragma once

// Parses an API path and method into what kube-apiserver's RequestInfoFactory derives.

#include <map>
#include <optional>
#include <string>

namespace reverser::kubesim {

struct RequestInfo {
  bool is_resource = false;
  std::string verb;        // get list watch create update patch delete deletecollection (or method)
  std::string api_prefix;  // "api" | "apis"
  std::string group;
  std::string version;
  std::string namespace_;
  std::string resource;
  std::string name;
  std::string subresource;
};

// `params` are the decoded query parameters (first value of each).
RequestInfo ParseRequestInfo(const std::string& method, const std::string& path,
                             const std::multimap<std::string, std::string>& params);

// Kubernetes query booleans: "0" / "false" (any case) are false; anything else, even "", true.
bool QueryBool(const std::multimap<std::string, std::string>& params, const std::string& key);
std::optional<std::string> QueryValue(const std::multimap<std::string, std::string>& params,
                                      const std::string& key);

}  // namespace reverser::kubesim
