#pragma once

// One reader per (type, scope) materialization (the Redis stream and checkpoint of one claim):
// one thread and one Redis connection tail the stream once and hand each batch to every splice
// stream that follows the materialization (SpliceStream: one per GitTarget). Threads and Redis
// connections thus grow with materializations, not with targets × types.
//
// A round: every follower does what it can without the shared read (start a session, wait for
// a usable materialization, send a resync, emit events whose author resolved, persist its
// cursor); then the followers that tail are grouped by read position and each group is served
// by one read. Followers that tail converge on the stream top, so there is normally one group,
// and only its read blocks (XREAD BLOCK, ended by new entries, by an author fact of the type, or
// at the earliest time a follower has work due). Each follower keeps its own cursor, lineage,
// pending events, dedup and state: a target still receives exactly its events, in order.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "libs/redisstore/body_cipher.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/redis_connection.h"
#include "proto/reverser/v1/catalog.pb.h"

namespace reverser::splicer {

class SpliceStream;

struct MaterializationReaderOptions {
  reverser::v1::Claim claim;  // the materialization: type and scope
  redisstore::RedisOptions redis;
  redisstore::KeyPrefix prefix = redisstore::KeyPrefix::Default();
  const redisstore::BodyCipher* body_cipher = nullptr;  // not owned
  size_t read_batch = 500;
  bool attribution = true;  // wake on author facts of the type
};

// "group/version/resource|scope": one reader per key.
std::string MaterializationKey(const reverser::v1::Claim& claim);

class MaterializationReader {
 public:
  explicit MaterializationReader(MaterializationReaderOptions options);
  ~MaterializationReader();
  MaterializationReader(const MaterializationReader&) = delete;
  MaterializationReader& operator=(const MaterializationReader&) = delete;

  // `stream` joins at the next round. Not owned; Remove it before destroying it.
  void Add(SpliceStream* stream);
  // Asks the reader to drop `stream` at its next round (without waiting).
  void RequestRemove(SpliceStream* stream);
  // Returns once the reader thread no longer touches `stream` (RequestRemove first if needed).
  void Remove(SpliceStream* stream);
  // Followers, including those joining and not yet removed.
  size_t size() const;

 private:
  void Run();
  // Applies joins and removals; returns false when stopping.
  bool TakeChanges(std::vector<SpliceStream*>& followers);
  void Round(std::vector<SpliceStream*>& followers);

  const MaterializationReaderOptions options_;
  std::unique_ptr<redisstore::RedisConnection> redis_;  // the reader thread's only connection

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<SpliceStream*> members_;   // every follower not removed (what size() counts)
  std::vector<SpliceStream*> joining_;   // added, not yet seen by the reader thread
  std::vector<SpliceStream*> leaving_;   // removal requested, not yet done
  std::vector<SpliceStream*> attached_;  // what the reader thread's current round may touch
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace reverser::splicer
