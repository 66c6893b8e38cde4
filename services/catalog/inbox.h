#pragma once

// What the blocking parts of the catalog (discovery, watches, probes) hand to the catalog
// actor. Each input is immutable once posted; the actor applies them in arrival order.

#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "libs/typeset/scan.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "services/catalog/controllers.h"
#include "services/catalog/objects.h"

namespace reverser::catalog {

using RescanCallback = std::function<void(absl::StatusOr<reverser::v1::RescanResponse>)>;

// One discovery pass: a scan, or the failure of the whole pass (nothing could be read).
struct ScanInput {
  absl::StatusOr<typeset::DiscoveryScan> scan;
  absl::Duration took;
  std::vector<RescanCallback> callbacks;  // Rescan requests served by this pass
};

// The complete listing of one kind (initial sync or relist).
struct ReplaceInput {
  ObjectKind kind;
  std::vector<nlohmann::json> objects;
};

// One live change.
struct EventInput {
  ObjectKind kind;
  bool deleted = false;
  nlohmann::json object;
};

struct ProbeInput {
  ObjectKey provider;
  ProviderProbe probe;
};

struct EncryptionSecretInput {
  ObjectKey target;
  EncryptionSecretResult result;
};

struct SummaryInput {
  reverser::v1::StreamSummary summary;
};

// A watch failed (it keeps retrying) or recovered: for the `watches` readiness component.
struct WatchHealthInput {
  ObjectKind kind;
  absl::Status status;
};

// A status write failed: forget it so the next reconcile writes it again.
struct StatusFailedInput {
  ObjectKey key;
};

using CatalogInput =
    std::variant<ScanInput, ReplaceInput, EventInput, ProbeInput, EncryptionSecretInput,
                 SummaryInput, WatchHealthInput, StatusFailedInput>;

class CatalogInbox {
 public:
  virtual ~CatalogInbox() = default;
  virtual void Post(CatalogInput input) = 0;
};

}  // namespace reverser::catalog
