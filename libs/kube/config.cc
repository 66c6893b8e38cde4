#include "libs/kube/config.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "libs/core/status.h"
#include "libs/manifest/yaml_reader.h"

namespace reverser::kube {
namespace {

using manifest::YamlNode;

// One named entry (cluster, user or context) and the folder of the file it came from.
struct Entry {
  YamlNode node;  // a mapping
  std::string base_dir;
};

// The merged view of one or more kubeconfig files.
struct Merged {
  std::map<std::string, Entry> clusters;
  std::map<std::string, Entry> users;
  std::map<std::string, Entry> contexts;
  std::string current_context;
};

std::string DirName(absl::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string ResolvePath(absl::string_view path, absl::string_view base_dir) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return std::string(path);
  return absl::StrCat(base_dir, "/", path);
}

// A null as YAML 1.1 writes it (kubeconfig files come from kubectl and client-go).
bool IsNull(const YamlNode& node) {
  return node.is_untagged_plain() &&
         (node.value.empty() || node.value == "~" || node.value == "null" || node.value == "Null" ||
          node.value == "NULL");
}

// The text of `key`'s value when it is a scalar and not null; "" otherwise.
std::string Scalar(const YamlNode& node, const char* key) {
  const YamlNode* value = node.Find(key);
  if (value == nullptr || !value->is_scalar() || IsNull(*value)) return "";
  return value->value;
}

// YAML 1.1 booleans, as client-go's YAML decoding reads them; nullopt for anything else.
std::optional<bool> Bool(const YamlNode& node) {
  static const auto* const kTrue = new std::set<std::string, std::less<>>{
      "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
  static const auto* const kFalse = new std::set<std::string, std::less<>>{
      "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
  if (!node.is_scalar()) return std::nullopt;
  if (kTrue->count(node.value)) return true;
  if (kFalse->count(node.value)) return false;
  return std::nullopt;
}

absl::Status AddNamedList(const YamlNode& root, const char* list_key, const char* item_key,
                          const std::string& base_dir, std::map<std::string, Entry>& into) {
  const YamlNode* list = root.Find(list_key);
  if (list == nullptr || IsNull(*list)) return absl::OkStatus();
  if (!list->is_sequence()) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig: \"", list_key, "\" is not a list"));
  }
  for (const YamlNode& item : list->items) {
    if (!item.is_mapping()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kubeconfig: an entry of \"", list_key, "\" is not a map"));
    }
    std::string name = Scalar(item, "name");
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kubeconfig: an entry of \"", list_key, "\" has no name"));
    }
    const YamlNode* body = item.Find(item_key);
    if (body != nullptr && !IsNull(*body) && !body->is_mapping()) {
      return absl::InvalidArgumentError(absl::StrCat("kubeconfig: ", list_key, " \"", name,
                                                     "\": \"", item_key, "\" is not a map"));
    }
    YamlNode empty;
    empty.kind = YamlNode::Kind::kMapping;
    // First definition wins, as in client-go's merge of $KUBECONFIG.
    into.emplace(name, Entry{body != nullptr && body->is_mapping() ? *body : empty, base_dir});
  }
  return absl::OkStatus();
}

absl::Status MergeDocument(absl::string_view yaml, const std::string& base_dir, Merged& merged) {
  // The reader's default limits: a kubeconfig is a few KiB.
  absl::StatusOr<std::vector<YamlNode>> documents = manifest::ParseYamlNodes(yaml);
  if (!documents.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig: invalid YAML: ", documents.status().message()));
  }
  if (documents->empty() || IsNull(documents->front())) {
    return absl::OkStatus();  // an empty file is an empty config
  }
  const YamlNode& root = documents->front();
  if (!root.is_mapping()) return absl::InvalidArgumentError("kubeconfig: top level is not a map");
  RETURN_IF_ERROR(AddNamedList(root, "clusters", "cluster", base_dir, merged.clusters));
  RETURN_IF_ERROR(AddNamedList(root, "users", "user", base_dir, merged.users));
  RETURN_IF_ERROR(AddNamedList(root, "contexts", "context", base_dir, merged.contexts));
  if (merged.current_context.empty()) merged.current_context = Scalar(root, "current-context");
  return absl::OkStatus();
}

// Reads `<field>-data` (base64) or `<field>` (a file path) into PEM text.
absl::StatusOr<std::string> ReadPemField(const Entry& entry, const std::string& field) {
  std::string data = Scalar(entry.node, (field + "-data").c_str());
  if (!data.empty()) {
    std::string decoded;
    if (!absl::Base64Unescape(data, &decoded)) {
      return absl::InvalidArgumentError(absl::StrCat("kubeconfig: ", field, "-data is not base64"));
    }
    return decoded;
  }
  std::string path = Scalar(entry.node, field.c_str());
  if (path.empty()) return std::string();
  auto contents = ReadFileToString(ResolvePath(path, entry.base_dir));
  if (!contents.ok()) return core::Annotate(contents.status(), absl::StrCat("kubeconfig: ", field));
  return contents;
}

absl::StatusOr<ClusterConfig> Resolve(const Merged& merged, const KubeconfigOptions& options) {
  std::string context_name = options.context.empty() ? merged.current_context : options.context;
  if (context_name.empty()) {
    return absl::FailedPreconditionError("kubeconfig: no current-context and none requested");
  }
  auto context = merged.contexts.find(context_name);
  if (context == merged.contexts.end()) {
    return absl::NotFoundError(
        absl::StrCat("kubeconfig: context \"", context_name, "\" not found"));
  }
  std::string cluster_name = Scalar(context->second.node, "cluster");
  auto cluster = merged.clusters.find(cluster_name);
  if (cluster == merged.clusters.end()) {
    return absl::NotFoundError(absl::StrCat("kubeconfig: context \"", context_name,
                                            "\" refers to unknown cluster \"", cluster_name, "\""));
  }
  ClusterConfig config;
  config.context = context_name;
  config.namespace_ = Scalar(context->second.node, "namespace");
  config.server = Scalar(cluster->second.node, "server");
  if (config.server.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig: cluster \"", cluster_name, "\" has no server"));
  }
  if (const YamlNode* skip = cluster->second.node.Find("insecure-skip-tls-verify");
      skip != nullptr && !IsNull(*skip)) {
    const std::optional<bool> value = Bool(*skip);
    if (!value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kubeconfig: cluster \"", cluster_name, "\": insecure-skip-tls-verify is not a boolean"));
    }
    config.insecure_skip_tls_verify = *value;
  }
  ASSIGN_OR_RETURN(config.ca_pem, ReadPemField(cluster->second, "certificate-authority"));

  std::string user_name = Scalar(context->second.node, "user");
  if (!user_name.empty()) {
    auto user = merged.users.find(user_name);
    if (user == merged.users.end()) {
      return absl::NotFoundError(absl::StrCat("kubeconfig: context \"", context_name,
                                              "\" refers to unknown user \"", user_name, "\""));
    }
    const Entry& u = user->second;
    if (u.node.Find("exec") != nullptr || u.node.Find("auth-provider") != nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          "kubeconfig: user \"", user_name, "\" uses exec/auth-provider, which is not supported"));
    }
    ASSIGN_OR_RETURN(config.client_cert_pem, ReadPemField(u, "client-certificate"));
    ASSIGN_OR_RETURN(config.client_key_pem, ReadPemField(u, "client-key"));
    if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kubeconfig: user \"", user_name, "\" needs both a client certificate and a key"));
    }
    config.token = Scalar(u.node, "token");
    std::string token_file = Scalar(u.node, "tokenFile");
    if (!token_file.empty()) config.token_file = ResolvePath(token_file, u.base_dir);
  }
  return config;
}

bool FileExists(const std::string& path) {
  std::ifstream in(path);
  return in.good();
}

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read \"", path, "\""));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

absl::StatusOr<ClusterConfig> ParseKubeconfig(absl::string_view yaml, absl::string_view base_dir,
                                              const KubeconfigOptions& options) {
  Merged merged;
  RETURN_IF_ERROR(MergeDocument(yaml, std::string(base_dir), merged));
  return Resolve(merged, options);
}

absl::StatusOr<ClusterConfig> LoadKubeconfigFiles(const std::vector<std::string>& paths,
                                                  const KubeconfigOptions& options) {
  Merged merged;
  bool any = false;
  for (const std::string& path : paths) {
    if (path.empty() || !FileExists(path)) continue;
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
    RETURN_IF_ERROR(core::Annotate(MergeDocument(text, DirName(path), merged), path));
    any = true;
  }
  if (!any) {
    return absl::NotFoundError(
        absl::StrCat("no kubeconfig file found in [", absl::StrJoin(paths, ":"), "]"));
  }
  return Resolve(merged, options);
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

absl::StatusOr<ClusterConfig> InClusterConfig(const EnvLookup& env, const std::string& root) {
  std::optional<std::string> host = env("KUBERNETES_SERVICE_HOST");
  std::optional<std::string> port = env("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return absl::FailedPreconditionError(
        "not running in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set");
  }
  ClusterConfig config;
  // IPv6 service hosts need brackets in a URL.
  std::string host_part = absl::StrContains(*host, ':') ? absl::StrCat("[", *host, "]") : *host;
  config.server = absl::StrCat("https://", host_part, ":", *port);
  config.token_file = root + "/token";
  ASSIGN_OR_RETURN(std::string token, ReadFileToString(config.token_file));
  if (absl::StripAsciiWhitespace(token).empty()) {
    return absl::FailedPreconditionError(absl::StrCat(config.token_file, " is empty"));
  }
  ASSIGN_OR_RETURN(config.ca_pem, ReadFileToString(root + "/ca.crt"));
  if (auto ns = ReadFileToString(root + "/namespace"); ns.ok()) {
    config.namespace_ = std::string(absl::StripAsciiWhitespace(*ns));
  }
  return config;
}

absl::StatusOr<ClusterConfig> LoadDefaultConfig(const std::string& kubeconfig_path,
                                                const KubeconfigOptions& options,
                                                const EnvLookup& env, const std::string& sa_root) {
  if (!kubeconfig_path.empty()) {
    if (!FileExists(kubeconfig_path)) {
      return absl::NotFoundError(absl::StrCat("kubeconfig \"", kubeconfig_path, "\" not found"));
    }
    return LoadKubeconfigFiles({kubeconfig_path}, options);
  }
  if (std::optional<std::string> list = env("KUBECONFIG"); list && !list->empty()) {
    return LoadKubeconfigFiles(absl::StrSplit(*list, ':', absl::SkipEmpty()), options);
  }
  if (std::optional<std::string> host = env("KUBERNETES_SERVICE_HOST"); host && !host->empty()) {
    return InClusterConfig(env, sa_root);
  }
  std::optional<std::string> home = env("HOME");
  if (!home || home->empty()) {
    return absl::NotFoundError("no kubeconfig: KUBECONFIG, in-cluster and $HOME are all unset");
  }
  return LoadKubeconfigFiles({*home + "/.kube/config"}, options);
}

}  // namespace reverser::kube
