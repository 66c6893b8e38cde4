#pragma once

// The catalog's gRPC surface (callback API): `Catalog` for materializers and splicers and the
// operator-facing `CatalogAdmin`. Both read published state from the feeds and hand requests
// that change state to a CatalogBackend; no handler blocks.
//
//  - WatchClaims: the current ClaimSet (when the caller's known_generation differs), then every
//    new one. Intermediate sets are skipped for a slow reader; each message replaces the last.
//  - WatchTables: a full TableUpdate first (or the next delta when the caller's
//    known_generation is one step behind), then one delta per generation while the reader
//    keeps up, or a full update when it fell behind the delta history.
//  - Nothing is streamed before the catalog is primed (first scan + every watched kind listed).

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "libs/runtime/admin_status.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "services/catalog/feeds.h"

namespace reverser::catalog {

// What the gRPC layer needs from the rest of the service.
class CatalogBackend {
 public:
  virtual ~CatalogBackend() = default;
  virtual ClaimFeed& claim_feed() = 0;
  virtual TableFeed& table_feed() = 0;
  virtual TypeFeed& type_feed() = 0;
  // A splicer's stream readiness for one GitTarget (rendered into its status).
  virtual void ReportStreamSummary(reverser::v1::StreamSummary summary) = 0;
  // Runs a discovery scan now; `done` runs (on another thread) once it was applied.
  virtual void Rescan(std::function<void(absl::StatusOr<reverser::v1::RescanResponse>)> done) = 0;
};

class CatalogGrpcService final : public reverser::v1::Catalog::CallbackService {
 public:
  explicit CatalogGrpcService(CatalogBackend* backend) : backend_(backend) {}

  grpc::ServerWriteReactor<reverser::v1::ClaimSet>* WatchClaims(
      grpc::CallbackServerContext* context,
      const reverser::v1::WatchClaimsRequest* request) override;
  grpc::ServerWriteReactor<reverser::v1::TableUpdate>* WatchTables(
      grpc::CallbackServerContext* context,
      const reverser::v1::WatchTablesRequest* request) override;
  grpc::ServerUnaryReactor* GetType(grpc::CallbackServerContext* context,
                                    const reverser::v1::GetTypeRequest* request,
                                    reverser::v1::TypeRecord* response) override;
  grpc::ServerUnaryReactor* ListTypes(grpc::CallbackServerContext* context,
                                      const reverser::v1::ListTypesRequest* request,
                                      reverser::v1::ListTypesResponse* response) override;
  grpc::ServerUnaryReactor* ReportStreamSummary(
      grpc::CallbackServerContext* context, const reverser::v1::StreamSummary* request,
      reverser::v1::ReportStreamSummaryResponse* response) override;

 private:
  CatalogBackend* backend_;
};

class CatalogAdminGrpcService final
    : public runtime::AdminStatusService<reverser::v1::CatalogAdmin> {
 public:
  CatalogAdminGrpcService(runtime::ServiceHost* host, CatalogBackend* backend)
      : AdminStatusService(host), backend_(backend) {}

  // Every record with its verdict, summary and the ordered checks: the first failing check
  // answers "why is this type not followed?".
  grpc::ServerUnaryReactor* ListTypes(grpc::CallbackServerContext* context,
                                      const reverser::v1::ListTypesRequest* request,
                                      reverser::v1::ListTypesResponse* response) override;
  grpc::ServerUnaryReactor* Rescan(grpc::CallbackServerContext* context,
                                   const reverser::v1::RescanRequest* request,
                                   reverser::v1::RescanResponse* response) override;

 private:
  CatalogBackend* backend_;
};

// ListTypes over a snapshot (shared by both services).
void FillListTypes(const TypeSnapshot& snapshot, bool followable_only,
                   reverser::v1::ListTypesResponse* response);

}  // namespace reverser::catalog
