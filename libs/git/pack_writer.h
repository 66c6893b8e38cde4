#pragma once

// Writes Git objects straight into one pack file (format version 2, no deltas) and its index
// (version 2), the way `git fast-import` does, instead of one zlib-compressed loose file per
// object. For commits that add thousands of objects (a first mirror, a big resync) this replaces
// thousands of file creations and renames with one sequential file.
//
// The pack is built in a temporary file inside the pack directory; Finish() names it
// pack-<checksum>.pack, writes the .idx beside it and moves both into place (the .idx last:
// readers only look at packs that have an index). Until then the objects exist only for Read()
// — a crash leaves a tmp_pack_* file that `git gc` removes.
//
// Not thread-safe.

#include <git2.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reverser::git {

class PackWriter {
 public:
  // Starts a pack in `pack_dir` (a repository's objects/pack directory, which must exist).
  static absl::StatusOr<std::unique_ptr<PackWriter>> Create(const std::string& pack_dir);
  // Removes the temporary file unless Finish() moved it into place.
  ~PackWriter();
  PackWriter(const PackWriter&) = delete;
  PackWriter& operator=(const PackWriter&) = delete;

  // Appends one object whose id the caller computed (libgit2 hashes before it writes). A second
  // write of an id already in the pack is a no-op. InvalidArgument for a type that is not a
  // commit, tree, blob or tag; Unavailable when the disk write fails.
  absl::Status Add(const git_oid& id, git_object_t type, absl::string_view data);

  bool Contains(const git_oid& id) const { return index_.contains(id); }
  // Type and size of an object in the pack (nullopt: not in it).
  std::optional<std::pair<git_object_t, size_t>> Header(const git_oid& id) const;
  // An object's content, inflated from the pack. NotFound when it is not in the pack.
  absl::StatusOr<std::string> Read(const git_oid& id, git_object_t* type) const;

  size_t object_count() const { return entries_.size(); }
  // The ids of the objects added so far, in pack order.
  std::vector<git_oid> ObjectIds() const;

  // Completes the pack (object count, trailing checksum), writes its index and moves both into
  // the pack directory. Returns the pack's checksum in hex, or nullopt when no object was added
  // (nothing is written). The writer accepts nothing afterwards.
  absl::StatusOr<std::optional<std::string>> Finish();

 private:
  struct OidHash {
    size_t operator()(const git_oid& id) const;
  };
  struct OidEq {
    bool operator()(const git_oid& a, const git_oid& b) const;
  };
  struct Entry {
    git_oid id;
    uint64_t offset;  // of the entry header in the pack
    uint64_t size;    // inflated size
    uint32_t crc32;   // of the packed bytes (header + compressed data), as the index records it
    git_object_t type;
  };

  PackWriter(std::string pack_dir, std::string temp_path, int fd);
  absl::Status Append(absl::string_view bytes);
  absl::Status Flush();
  // The packed bytes [begin, end) of the file, flushing buffered output first.
  absl::StatusOr<std::string> ReadRange(uint64_t begin, uint64_t end) const;
  absl::StatusOr<std::string> PackChecksum();
  std::string BuildIndex(const std::string& pack_checksum) const;

  std::string pack_dir_;
  std::string temp_path_;
  int fd_ = -1;
  bool finished_ = false;
  uint64_t size_ = 0;     // bytes appended so far (written + buffered)
  std::string buffer_;    // appended bytes not yet written to fd_
  std::string deflated_;  // scratch output of the compressor
  // In pack order. A deque: it grows without copying, so a large pack never holds two
  // copies of its table.
  std::deque<Entry> entries_;
  absl::flat_hash_map<git_oid, uint32_t, OidHash, OidEq> index_;  // id → position in entries_
  struct Deflater;
  std::unique_ptr<Deflater> deflater_;  // one zlib stream, reset per object
};

}  // namespace reverser::git
