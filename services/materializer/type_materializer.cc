#include "services/materializer/type_materializer.h"

#include "services/materializer/audit_relist_intake.h"
#include "services/materializer/watch_intake.h"

namespace reverser::materializer {

TypeMaterializer::TypeMaterializer(std::shared_ptr<kube::RestClient> client,
                                   TypeMaterializerOptions options,
                                   runtime::MetricsRegistry* metrics)
    : core_(std::move(options), metrics) {
  if (core_.options().intake == Intake::kAudit) {
    intake_ = std::make_unique<AuditRelistIntake>(std::move(client), &core_);
  } else {
    intake_ = std::make_unique<WatchIntake>(std::move(client), &core_);
  }
  core_.SetInterrupt([this] { intake_->Interrupt(); });
}

TypeMaterializer::~TypeMaterializer() { Stop(); }

void TypeMaterializer::Start() {
  thread_ = std::thread([this] { Run(); });
}

void TypeMaterializer::Run() {
  std::optional<MaterializationCore::Opened> opened = core_.Open();
  if (!opened) return;  // stopping
  intake_->Run(*opened);
}

void TypeMaterializer::Stop() {
  core_.RequestStop();
  intake_->Interrupt();
  if (thread_.joinable()) thread_.join();
}

absl::Status TypeMaterializer::StopAndRelease() {
  Stop();
  return core_.Release();
}

}  // namespace reverser::materializer
