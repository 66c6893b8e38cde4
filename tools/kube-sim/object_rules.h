#pragma once

// Per-kind strategy: what the apiserver fills in on create (defaults, uid, timestamps), which
// names are valid, and how generation moves.

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"
#include "tools/kube-sim/resource_types.h"

namespace reverser::kubesim {

std::string NewUid();
// generateName + 5 characters from kube's alphabet.
std::string GenerateName(const std::string& prefix);

// Validates metadata.name for the type (and type-specific fields). Empty: valid.
std::vector<StatusCause> ValidateObject(const ResourceType& type, const Json& object);

// The decoder's type checks for well-known fields (metadata strings, string maps, finalizers,
// ConfigMap/Secret data): a 400 with Go's "cannot unmarshal" wording, or nullopt.
std::optional<ApiError> CheckFieldTypes(const ResourceType& type, const Json& object);

// Fills what the server sets on create: uid, creationTimestamp, generation, kind defaults.
Json PrepareForCreate(const ResourceType& type, Json object, absl::Time now);

// Kind-specific defaulting applied on every write (idempotent).
Json ApplyDefaults(const ResourceType& type, Json object);

// Carries server-owned metadata from `current` into `next` for an update, keeps status (or
// everything but status for the status subresource), and bumps generation when the spec moved.
Json PrepareForUpdate(const ResourceType& type, const Json& current, Json next,
                      const std::string& subresource);

// Objects equal except for resourceVersion and managedFields timestamps (a no-op write).
bool SameContent(const Json& a, const Json& b);

}  // namespace reverser::kubesim
