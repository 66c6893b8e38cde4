#include "services/gitworker/secret_source.h"

#include <dirent.h>

#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "libs/kube/api_error.h"
#include "libs/kube/secret_data.h"

namespace reverser::gitworker {
namespace {

struct SecretName {
  std::string namespace_;
  std::string name;
};

absl::StatusOr<SecretName> SplitSecretName(const std::string& secret) {
  std::vector<std::string> parts = absl::StrSplit(secret, '/');
  if (parts.size() != 2 || parts[0].empty() || parts[1].empty() || parts[0] == ".." ||
      parts[1] == ".." || parts[0] == "." || parts[1] == ".") {
    return absl::InvalidArgumentError(
        absl::StrCat("secret \"", secret, "\" is not namespace/name"));
  }
  return SecretName{parts[0], parts[1]};
}

}  // namespace

SecretReader DirectorySecretReader(std::string dir) {
  return [dir](const std::string& secret) -> absl::StatusOr<std::map<std::string, std::string>> {
    auto name = SplitSecretName(secret);
    if (!name.ok()) return name.status();
    const std::string path = absl::StrCat(dir, "/", name->namespace_, "/", name->name);
    DIR* d = opendir(path.c_str());
    if (d == nullptr) {
      return absl::NotFoundError(absl::StrCat("secret ", secret, " not found at ", path));
    }
    std::map<std::string, std::string> data;
    while (dirent* entry = readdir(d)) {
      std::string key = entry->d_name;
      if (key.empty() || key[0] == '.') continue;  // also skips Kubernetes' ..data links
      std::ifstream in(absl::StrCat(path, "/", key), std::ios::binary);
      if (!in) continue;
      std::stringstream content;
      content << in.rdbuf();
      data[key] = content.str();
    }
    closedir(d);
    return data;
  };
}

SecretReader ApiSecretReader(std::shared_ptr<kube::RestClient> client) {
  return [client](const std::string& secret) -> absl::StatusOr<std::map<std::string, std::string>> {
    auto name = SplitSecretName(secret);
    if (!name.ok()) return name.status();
    auto object = client->Get({"", "v1", "secrets"}, name->namespace_, name->name);
    if (!object.ok()) {
      if (kube::IsApiNotFound(object.status())) {
        return absl::NotFoundError(absl::StrCat("secret ", secret, " not found"));
      }
      return absl::UnavailableError(
          absl::StrCat("reading secret ", secret, ": ", object.status().message()));
    }
    return kube::DecodeSecretData(*object);
  };
}

CredentialsResolver SecretCredentialsResolver(SecretReader reader) {
  return [reader](const std::string& secret) -> absl::StatusOr<git::GitCredentials> {
    auto data = reader(secret);
    if (!data.ok()) return data.status();
    return git::CredentialsFromSecretData(*data);
  };
}

SigningKeyResolver CachingSigningKeyResolver(SecretReader reader, absl::Duration ttl,
                                             const core::Clock* clock) {
  struct Cached {
    absl::Time read_at;
    std::shared_ptr<const git::SshSigningKey> key;
  };
  struct Cache {
    std::mutex mu;
    std::map<std::string, Cached> keys;
  };
  auto cache = std::make_shared<Cache>();
  return
      [reader, ttl, clock, cache](
          const std::string& secret) -> absl::StatusOr<std::shared_ptr<const git::SshSigningKey>> {
        const absl::Time now = clock->Now();
        {
          std::lock_guard lock(cache->mu);
          auto it = cache->keys.find(secret);
          if (it != cache->keys.end() && now - it->second.read_at < ttl) return it->second.key;
        }
        // Read outside the lock: another branch's slow API call does not hold this one up.
        auto data = reader(secret);
        if (!data.ok()) return data.status();
        auto key = git::SshSigningKey::FromSecretData(*data);
        if (!key.ok()) return key.status();
        auto shared = std::make_shared<const git::SshSigningKey>(*std::move(key));
        std::lock_guard lock(cache->mu);
        cache->keys[secret] = {now, shared};
        return shared;
      };
}

}  // namespace reverser::gitworker
