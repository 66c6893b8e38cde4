#pragma once

// CAF 0.17 keeps a reference to an actor system's logger in the thread-local storage of every
// thread that spawns an actor or creates a scoped_actor of that system (actor_system::spawn_impl,
// scoped_actor's constructor), and ~actor_system waits until every such reference is gone. A
// thread CAF does not own (a gRPC callback thread, a follower's, the main thread) keeps it until
// it exits or touches another system: the shutdown then waits on an idle thread, for seconds or
// for ever. Such threads drop it after each use with these. CAF's own threads need nothing.

#include "caf/logger.hpp"

namespace reverser::runtime {

// Drops this thread's reference to the logger of the last actor system it spawned in.
inline void ReleaseCafThreadLogger() { caf::logger::set_current_actor_system(nullptr); }

// Drops it when the scope ends. Declared before the scoped_actor it follows, so it runs after
// that actor is gone.
class CafThreadLoggerRelease {
 public:
  CafThreadLoggerRelease() = default;
  CafThreadLoggerRelease(const CafThreadLoggerRelease&) = delete;
  CafThreadLoggerRelease& operator=(const CafThreadLoggerRelease&) = delete;
  ~CafThreadLoggerRelease() { ReleaseCafThreadLogger(); }
};

}  // namespace reverser::runtime
