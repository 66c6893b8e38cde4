#include "services/splicer/materialization_reader.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "libs/core/proto_convert.h"
#include "libs/redisstore/author_fact_store.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/runtime/log.h"
#include "services/splicer/splice_stream.h"

namespace reverser::splicer {
namespace {

// The longest a round waits (in Redis or, with no tailing follower, here): what bounds how late
// a restart, resplice or ack is acted on.
constexpr absl::Duration kMaxWait = absl::Milliseconds(500);

}  // namespace

std::string MaterializationKey(const reverser::v1::Claim& claim) {
  const auto& gvr = claim.type().gvr();
  std::string scope = claim.scope().has_namespace_()
                          ? absl::StrCat("ns:", claim.scope().namespace_())
                          : std::string("cluster");
  return absl::StrCat(gvr.group(), "/", gvr.version(), "/", gvr.resource(), "|", scope);
}

MaterializationReader::MaterializationReader(MaterializationReaderOptions options)
    : options_(std::move(options)) {
  thread_ = std::thread([this] { Run(); });
}

MaterializationReader::~MaterializationReader() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MaterializationReader::Add(SpliceStream* stream) {
  {
    std::lock_guard lock(mu_);
    members_.push_back(stream);
    joining_.push_back(stream);
  }
  cv_.notify_all();
}

void MaterializationReader::RequestRemove(SpliceStream* stream) {
  {
    std::lock_guard lock(mu_);
    auto joining = std::find(joining_.begin(), joining_.end(), stream);
    if (joining != joining_.end()) joining_.erase(joining);
    members_.erase(std::remove(members_.begin(), members_.end(), stream), members_.end());
    if (std::find(attached_.begin(), attached_.end(), stream) != attached_.end() &&
        std::find(leaving_.begin(), leaving_.end(), stream) == leaving_.end()) {
      leaving_.push_back(stream);
    }
  }
  cv_.notify_all();
}

void MaterializationReader::Remove(SpliceStream* stream) {
  RequestRemove(stream);
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] {
    return std::find(attached_.begin(), attached_.end(), stream) == attached_.end();
  });
}

size_t MaterializationReader::size() const {
  std::lock_guard lock(mu_);
  return members_.size();
}

bool MaterializationReader::TakeChanges(std::vector<SpliceStream*>& followers) {
  std::vector<SpliceStream*> joined;
  {
    std::lock_guard lock(mu_);
    for (SpliceStream* leaving : leaving_) {
      attached_.erase(std::remove(attached_.begin(), attached_.end(), leaving), attached_.end());
    }
    leaving_.clear();
    joined.swap(joining_);
    attached_.insert(attached_.end(), joined.begin(), joined.end());
    followers = attached_;
    if (stopping_) return false;
  }
  cv_.notify_all();  // removals are done
  if (redis_) {
    for (SpliceStream* stream : joined) stream->Attach(redis_.get());
  }
  return true;
}

void MaterializationReader::Run() {
  std::vector<SpliceStream*> followers;
  absl::Duration backoff = absl::Milliseconds(100);
  while (TakeChanges(followers)) {
    if (!redis_) {
      auto redis = redisstore::RedisConnection::Connect(options_.redis);
      if (redis.ok()) {
        redis_ = std::move(*redis);
        for (SpliceStream* stream : followers) stream->Attach(redis_.get());
        backoff = absl::Milliseconds(100);
      } else {
        for (SpliceStream* stream : followers) stream->Fail(redis.status());
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, absl::ToChronoMilliseconds(backoff),
                     [&] { return stopping_ || !leaving_.empty() || !joining_.empty(); });
        backoff = std::min(backoff * 2, absl::Seconds(5));
        continue;
      }
    }
    Round(followers);
  }
  // Stopping: every follower still attached is let go (its owner stops it).
  std::lock_guard lock(mu_);
  attached_.clear();
  cv_.notify_all();
}

void MaterializationReader::Round(std::vector<SpliceStream*>& followers) {
  const auto gvr = core::FromProto(options_.claim.type().gvr());
  const auto scope = core::FromProto(options_.claim.scope());
  redisstore::MaterializationStore store(redis_.get(), options_.prefix, gvr, scope);
  // Facts of this type wake the read, so a waiting event is attributed as soon as its fact
  // lands rather than at its next lookup.
  const std::string group_resource = redisstore::GroupResourceSegment(
      options_.claim.type().gvr().group(), options_.claim.type().gvr().resource());
  redisstore::AuthorFactStore facts(redis_.get(), options_.prefix);
  redisstore::MaterializationStore::WakeSignal fact_signal;
  fact_signal.key = redisstore::AuthorFactSignalKey(options_.prefix, group_resource);
  bool signal_known = false;

  // One round per loop; the store and fact signal live as long as the followers do not change.
  for (bool first = true;; first = false) {
    if (!first && !TakeChanges(followers)) return;
    for (SpliceStream* stream : followers) {
      store.UseBodyCipher(options_.body_cipher, stream->sensitive());
      stream->Round(store);
    }
    const absl::Time now = absl::Now();
    absl::Duration wait = kMaxWait;
    bool awaiting_facts = false;
    std::map<core::StreamPosition, std::vector<SpliceStream*>> groups;
    for (SpliceStream* stream : followers) {
      wait = std::min(wait, stream->NextWake(now));
      if (auto position = stream->TailPosition()) {
        groups[*position].push_back(stream);
        awaiting_facts |= stream->AwaitingFacts();
      }
    }
    wait = std::max(wait, absl::Milliseconds(1));
    if (groups.empty()) {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, absl::ToChronoMilliseconds(wait),
                   [&] { return stopping_ || !leaving_.empty() || !joining_.empty(); });
      continue;
    }
    if (options_.attribution && awaiting_facts && !signal_known) {
      auto latest = facts.LatestSignal(group_resource);
      if (latest.ok()) {
        fact_signal.last_id = *latest;
        signal_known = true;
      }
    }
    // Lower groups first, without blocking (they catch up and merge); only the group at the
    // highest position blocks, and only when nothing else came.
    bool progressed = false;
    for (auto it = groups.begin(); it != groups.end(); ++it) {
      const bool last = std::next(it) == groups.end();
      const bool use_signal = last && awaiting_facts && signal_known && options_.attribution;
      auto batch = store.WaitAfter(it->first, options_.read_batch,
                                   last && !progressed ? wait : absl::ZeroDuration(),
                                   use_signal ? &fact_signal : nullptr);
      if (!batch.ok()) {
        for (SpliceStream* stream : it->second) stream->Fail(batch.status());
        continue;
      }
      progressed |= !batch->entries.empty() || batch->behind_checkpoint;
      bool fired = false;
      if (fact_signal.fired) {
        fact_signal.fired = false;
        fired = true;
        auto latest = facts.LatestSignal(group_resource);
        if (latest.ok()) fact_signal.last_id = *latest;
      }
      for (SpliceStream* stream : it->second) {
        store.UseBodyCipher(options_.body_cipher, stream->sensitive());
        stream->OnBatch(store, *batch, fired);
      }
    }
  }
}

}  // namespace reverser::splicer
