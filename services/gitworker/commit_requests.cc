#include "services/gitworker/commit_requests.h"

namespace reverser::gitworker {

using reverser::v1::FinalizeOutcome;

CommitRequestView CommitRequestBook::Register(const CommitRequestSpec& spec, absl::Time now) {
  if (auto it = requests_.find(spec.id); it != requests_.end()) {
    Request& request = it->second;
    if (!request.view.resolved && (request.spec.window_key != spec.window_key ||
                                   request.spec.message != spec.message)) {
      Resolve(request, reverser::v1::FINALIZE_OUTCOME_WINDOW_MISMATCH, "", now);
    }
    return request.view;
  }
  Request request;
  request.spec = spec;
  request.received = now;
  request.due = now + std::max(spec.close_delay, absl::ZeroDuration());
  request.view.known = true;
  if (requests_.size() >= kMaxRequests) {
    Resolve(request, reverser::v1::FINALIZE_OUTCOME_FAILED, "", now);
    return request.view;  // not kept: the book is full
  }
  order_.emplace(next_order_++, spec.id);
  auto [it, inserted] = requests_.emplace(spec.id, std::move(request));
  return it->second.view;
}

CommitRequestView CommitRequestBook::View(const std::string& id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? CommitRequestView{} : it->second.view;
}

std::optional<std::string> CommitRequestBook::BindWaiting(const std::string& window_key,
                                                          uint64_t write_id) {
  for (const auto& [id, request] : requests_) {
    if (request.write_id == write_id) return std::nullopt;  // one request per window
  }
  for (auto it = order_.begin(); it != order_.end(); ++it) {
    Request& request = requests_.at(it->second);
    if (request.spec.window_key != window_key) continue;
    request.write_id = write_id;
    order_.erase(it);
    return request.spec.message;
  }
  return std::nullopt;
}

std::vector<uint64_t> CommitRequestBook::TakeDue(absl::Time now) {
  std::vector<uint64_t> finalize;
  for (auto it = requests_.begin(); it != requests_.end();) {
    Request& request = it->second;
    if (request.view.resolved) {
      if (now - request.view.resolved_at >= kOutcomeRetention) {
        it = requests_.erase(it);
        continue;
      }
    } else if (!request.finalized && request.due <= now) {
      request.finalized = true;
      if (request.write_id.has_value()) {
        finalize.push_back(*request.write_id);
      } else {
        Resolve(request, reverser::v1::FINALIZE_OUTCOME_NO_OPEN_WINDOW, "", now);
      }
    }
    ++it;
  }
  return finalize;
}

void CommitRequestBook::WriteFinished(uint64_t write_id, WriteEnd end, const std::string& sha,
                                      absl::Time now) {
  for (auto& [id, request] : requests_) {
    if (request.view.resolved || request.write_id != write_id) continue;
    switch (end) {
      case WriteEnd::kPushed:
        Resolve(request, reverser::v1::FINALIZE_OUTCOME_COMMITTED, sha, now);
        break;
      case WriteEnd::kEmpty:
        Resolve(request, reverser::v1::FINALIZE_OUTCOME_ALREADY_PRESENT, "", now);
        break;
      case WriteEnd::kFailed:
        Resolve(request, reverser::v1::FINALIZE_OUTCOME_FAILED, "", now);
        break;
    }
  }
}

std::optional<absl::Time> CommitRequestBook::NextDeadline() const {
  std::optional<absl::Time> next;
  auto consider = [&next](absl::Time at) {
    if (!next.has_value() || at < *next) next = at;
  };
  for (const auto& [id, request] : requests_) {
    if (request.view.resolved) {
      consider(request.view.resolved_at + kOutcomeRetention);
    } else if (!request.finalized) {
      consider(request.due);
    }
  }
  return next;
}

void CommitRequestBook::Resolve(Request& request, FinalizeOutcome outcome, const std::string& sha,
                                absl::Time now) {
  request.view.resolved = true;
  request.view.outcome = outcome;
  request.view.sha = sha;
  request.view.resolved_at = now;
  for (auto it = order_.begin(); it != order_.end(); ++it) {
    if (it->second == request.spec.id) {
      order_.erase(it);
      break;
    }
  }
}

}  // namespace reverser::gitworker
