#include "libs/membership/member_view.h"

#include <utility>

#include "libs/core/status.h"
#include "libs/membership/lease.h"

namespace reverser::membership {

// Reflector events into the tracker (on the reflector's thread).
class MemberView::Handler final : public kube::ReplacingHandler {
 public:
  explicit Handler(MemberView& view) : view_(view) {}

  void OnReplaced(std::vector<nlohmann::json> objects, const std::string& resource_version,
                  kube::SyncReason reason) override {
    std::vector<LeaseRecord> leases;
    for (const nlohmann::json& object : objects) {
      absl::StatusOr<LeaseRecord> lease = ParseLease(object);
      if (lease.ok()) leases.push_back(std::move(*lease));  // not a Lease: not a member
    }
    std::optional<Membership> changed;
    {
      absl::MutexLock lock(&view_.mu_);
      view_.tracker_.Replace(leases, view_.clock_.Now());
      view_.current_.synced = true;
      changed = view_.UpdateLocked();
    }
    view_.Deliver(std::move(changed));
  }

  void OnLiveEvent(const kube::ReflectorEvent& event) override {
    if (event.type != kube::ReflectorEventType::kAdded &&
        event.type != kube::ReflectorEventType::kModified &&
        event.type != kube::ReflectorEventType::kDeleted) {
      return;
    }
    absl::StatusOr<LeaseRecord> lease = ParseLease(event.object);
    if (!lease.ok()) return;
    std::optional<Membership> changed;
    {
      absl::MutexLock lock(&view_.mu_);
      if (event.type == kube::ReflectorEventType::kDeleted) {
        view_.tracker_.Remove(lease->name);
      } else {
        view_.tracker_.Observe(*lease, view_.clock_.Now());
      }
      changed = view_.UpdateLocked();
    }
    view_.Deliver(std::move(changed));
  }

 private:
  MemberView& view_;
};

absl::StatusOr<std::unique_ptr<MemberView>> MemberView::Create(kube::RestClient& client,
                                                               MemberViewOptions options,
                                                               const core::Clock& clock,
                                                               MembershipCallback on_change) {
  // The service and namespace are checked as a member's would be (any replica id).
  RETURN_IF_ERROR((MemberIdentity{options.service, "x", options.namespace_, ""}).Validate());
  RETURN_IF_ERROR(options.timing.Validate());
  if (options.max_recheck <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("member view: max_recheck must be positive");
  }
  return std::unique_ptr<MemberView>(
      new MemberView(client, std::move(options), clock, std::move(on_change)));
}

MemberView::MemberView(kube::RestClient& client, MemberViewOptions options,
                       const core::Clock& clock, MembershipCallback on_change)
    : options_(std::move(options)),
      clock_(clock),
      on_change_(std::move(on_change)),
      tracker_(options_.timing.grace) {
  handler_ = std::make_unique<Handler>(*this);
  kube::ReflectorOptions reflector = options_.reflector;
  reflector.gvr = LeasesResource();
  reflector.namespace_ = options_.namespace_;
  reflector.label_selector = MembershipSelector(options_.service);
  reflector.raw_objects = false;
  reflector_ = std::make_unique<kube::Reflector>(client, std::move(reflector), *handler_);
}

MemberView::~MemberView() { Stop(); }

void MemberView::Start() {
  if (reflector_thread_.joinable()) return;
  reflector_thread_ = std::thread([this] { reflector_->Run().IgnoreError(); });
  timer_thread_ = std::thread([this] { TimerLoop(); });
}

void MemberView::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  {
    absl::MutexLock lock(&deliver_mu_);
    delivering_stopped_ = true;
  }
  reflector_->Stop();
  if (reflector_thread_.joinable()) reflector_thread_.join();
  if (timer_thread_.joinable()) timer_thread_.join();
}

Membership MemberView::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

std::optional<Membership> MemberView::UpdateLocked() {
  wake_ = true;
  std::vector<Member> live = tracker_.Live(clock_.Now());
  bool same = live.size() == current_.members.size();
  for (size_t i = 0; same && i < live.size(); ++i) same = live[i].SameMember(current_.members[i]);
  current_.members = std::move(live);  // renew times and expiries move on every renewal
  if (same && current_.generation > 0) return std::nullopt;
  if (!current_.synced) return std::nullopt;  // nothing is known before the first listing
  ++current_.generation;
  return current_;
}

void MemberView::Deliver(std::optional<Membership> changed) {
  if (!changed.has_value() || !on_change_) return;
  absl::MutexLock lock(&deliver_mu_);
  // A later generation already delivered from the other thread: this one is stale.
  if (delivering_stopped_ || changed->generation <= delivered_generation_) return;
  delivered_generation_ = changed->generation;
  on_change_(*changed);
}

void MemberView::Recheck() {
  std::optional<Membership> changed;
  {
    absl::MutexLock lock(&mu_);
    changed = UpdateLocked();
  }
  Deliver(std::move(changed));
}

void MemberView::TimerLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      absl::Duration wait = options_.max_recheck;
      const absl::Time now = clock_.Now();
      if (std::optional<absl::Time> next = tracker_.NextExpiry(now); next.has_value()) {
        wait = std::min(wait, *next - now);
      }
      wake_ = false;
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || wake_; };
      mu_.AwaitWithTimeout(absl::Condition(&woken), wait);
      if (stopping_) return;
    }
    Recheck();
  }
}

bool MemberView::WaitFor(const std::function<bool(const Membership&)>& done,
                         absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto holds = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done(current_); };
  return mu_.AwaitWithTimeout(absl::Condition(&holds), timeout);
}

}  // namespace reverser::membership
