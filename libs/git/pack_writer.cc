#include "libs/git/pack_writer.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"

namespace reverser::git {
namespace {

constexpr size_t kFlushAt = 1 << 20;
constexpr size_t kHeaderSize = 12;  // "PACK", version, object count
constexpr size_t kChecksumSize = 20;

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

void PutBe32(std::string* out, uint32_t v) {
  const char bytes[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                         static_cast<char>(v >> 8), static_cast<char>(v)};
  out->append(bytes, 4);
}

void PutBe64(std::string* out, uint64_t v) {
  PutBe32(out, static_cast<uint32_t>(v >> 32));
  PutBe32(out, static_cast<uint32_t>(v));
}

std::string PackHeader(uint32_t count) {
  std::string header = "PACK";
  PutBe32(&header, 2);
  PutBe32(&header, count);
  return header;
}

// The entry header: type in bits 4-6 of the first byte, the size in little-endian groups of
// 4 then 7 bits, high bit = more bytes follow.
void PutEntryHeader(std::string* out, git_object_t type, uint64_t size) {
  unsigned char byte = static_cast<unsigned char>((type << 4) | (size & 0x0f));
  size >>= 4;
  while (size != 0) {
    out->push_back(static_cast<char>(byte | 0x80));
    byte = size & 0x7f;
    size >>= 7;
  }
  out->push_back(static_cast<char>(byte));
}

absl::Status WriteAll(int fd, absl::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("writing", path);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status ReadAllAt(int fd, char* out, size_t size, uint64_t offset, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::pread(fd, out, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("reading", path);
    out += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> WriteTemp(const std::string& dir, const std::string& bytes) {
  std::string path = absl::StrCat(dir, "/tmp_idx_XXXXXX");
  int fd = ::mkstemp(path.data());
  if (fd < 0) return Errno("creating", path);
  absl::Status status = WriteAll(fd, bytes, path);
  if (::close(fd) != 0 && status.ok()) status = Errno("closing", path);
  if (!status.ok()) {
    ::unlink(path.c_str());
    return status;
  }
  return path;
}

// Moves a finished file into place read-only, like git does with packs. An existing file of the
// same name has the same content (names are content checksums), so it is kept.
absl::Status Install(const std::string& from, const std::string& to) {
  ::chmod(from.c_str(), 0444);
  if (::access(to.c_str(), F_OK) == 0) {
    ::unlink(from.c_str());
    return absl::OkStatus();
  }
  if (::rename(from.c_str(), to.c_str()) != 0) return Errno("installing", to);
  return absl::OkStatus();
}

}  // namespace

struct PackWriter::Deflater {
  z_stream stream{};
  bool ready = false;
  ~Deflater() {
    if (ready) deflateEnd(&stream);
  }
};

size_t PackWriter::OidHash::operator()(const git_oid& id) const {
  size_t h;  // object ids are uniformly distributed: their first bytes are a fine hash
  std::memcpy(&h, id.id, sizeof(h));
  return h;
}

bool PackWriter::OidEq::operator()(const git_oid& a, const git_oid& b) const {
  return std::memcmp(a.id, b.id, GIT_OID_RAWSZ) == 0;
}

PackWriter::PackWriter(std::string pack_dir, std::string temp_path, int fd)
    : pack_dir_(std::move(pack_dir)),
      temp_path_(std::move(temp_path)),
      fd_(fd),
      deflater_(std::make_unique<Deflater>()) {}

PackWriter::~PackWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink(temp_path_.c_str());
}

absl::StatusOr<std::unique_ptr<PackWriter>> PackWriter::Create(const std::string& pack_dir) {
  std::string path = absl::StrCat(pack_dir, "/tmp_pack_XXXXXX");
  int fd = ::mkstemp(path.data());
  if (fd < 0) return Errno("creating", path);
  std::unique_ptr<PackWriter> writer(new PackWriter(pack_dir, path, fd));
  if (deflateInit(&writer->deflater_->stream, Z_DEFAULT_COMPRESSION) != Z_OK) {
    return absl::InternalError("zlib deflateInit failed");
  }
  writer->deflater_->ready = true;
  // The object count is not known yet; Finish() rewrites the header.
  RETURN_IF_ERROR(writer->Append(PackHeader(0)));
  return writer;
}

absl::Status PackWriter::Append(absl::string_view bytes) {
  buffer_.append(bytes.data(), bytes.size());
  size_ += bytes.size();
  if (buffer_.size() >= kFlushAt) return Flush();
  return absl::OkStatus();
}

absl::Status PackWriter::Flush() {
  if (buffer_.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(WriteAll(fd_, buffer_, temp_path_));
  buffer_.clear();
  return absl::OkStatus();
}

absl::Status PackWriter::Add(const git_oid& id, git_object_t type, absl::string_view data) {
  if (finished_) return absl::FailedPreconditionError("pack already finished");
  if (type != GIT_OBJECT_COMMIT && type != GIT_OBJECT_TREE && type != GIT_OBJECT_BLOB &&
      type != GIT_OBJECT_TAG) {
    return absl::InvalidArgumentError(absl::StrCat("cannot pack an object of type ", type));
  }
  if (Contains(id)) return absl::OkStatus();
  if (data.size() > std::numeric_limits<uInt>::max()) {
    // One zlib call takes at most 4 GiB; no manifest comes near that.
    return absl::InvalidArgumentError("object too large to pack (over 4 GiB)");
  }

  z_stream& z = deflater_->stream;
  if (deflateReset(&z) != Z_OK) return absl::InternalError("zlib deflateReset failed");
  deflated_.resize(deflateBound(&z, data.size()));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(deflated_.data());
  z.avail_out = static_cast<uInt>(deflated_.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) return absl::InternalError("zlib deflate failed");
  deflated_.resize(z.total_out);

  std::string header;
  PutEntryHeader(&header, type, data.size());
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(header.data()), header.size());
  crc = crc32(crc, reinterpret_cast<const Bytef*>(deflated_.data()), deflated_.size());

  Entry entry{id, size_, data.size(), static_cast<uint32_t>(crc), type};
  RETURN_IF_ERROR(Append(header));
  RETURN_IF_ERROR(Append(deflated_));
  index_.emplace(id, static_cast<uint32_t>(entries_.size()));
  entries_.push_back(entry);
  return absl::OkStatus();
}

std::optional<std::pair<git_object_t, size_t>> PackWriter::Header(const git_oid& id) const {
  auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  const Entry& entry = entries_[it->second];
  return std::make_pair(entry.type, static_cast<size_t>(entry.size));
}

absl::StatusOr<std::string> PackWriter::ReadRange(uint64_t begin, uint64_t end) const {
  std::string bytes(end - begin, '\0');
  const uint64_t on_disk = size_ - buffer_.size();
  // The range may straddle what is written and what is still buffered.
  if (begin < on_disk) {
    const uint64_t from_disk = std::min(end, on_disk) - begin;
    RETURN_IF_ERROR(ReadAllAt(fd_, bytes.data(), from_disk, begin, temp_path_));
  }
  if (end > on_disk) {
    const uint64_t from = std::max(begin, on_disk);
    std::memcpy(bytes.data() + (from - begin), buffer_.data() + (from - on_disk), end - from);
  }
  return bytes;
}

absl::StatusOr<std::string> PackWriter::Read(const git_oid& id, git_object_t* type) const {
  auto it = index_.find(id);
  if (it == index_.end()) return absl::NotFoundError("object not in the pack");
  const Entry& entry = entries_[it->second];
  const uint64_t end = it->second + 1 < entries_.size() ? entries_[it->second + 1].offset : size_;
  ASSIGN_OR_RETURN(std::string packed, ReadRange(entry.offset, end));
  size_t header = 0;
  while (header < packed.size() && (static_cast<unsigned char>(packed[header]) & 0x80)) ++header;
  ++header;
  if (header > packed.size()) {
    return absl::DataLossError(absl::StrCat("corrupt object in pack ", temp_path_));
  }
  std::string data(entry.size, '\0');
  uLongf length = static_cast<uLongf>(entry.size);
  // uncompress() wants a non-null output buffer even for an empty object.
  Bytef empty = 0;
  int rc = uncompress(entry.size ? reinterpret_cast<Bytef*>(data.data()) : &empty, &length,
                      reinterpret_cast<const Bytef*>(packed.data() + header),
                      static_cast<uLong>(packed.size() - header));
  if (rc != Z_OK || length != entry.size) {
    return absl::DataLossError(absl::StrCat("corrupt object in pack ", temp_path_));
  }
  *type = entry.type;
  return data;
}

absl::StatusOr<std::string> PackWriter::PackChecksum() {
  // The count in the header changed after the objects were written: hash the file once through.
  RETURN_IF_ERROR(Flush());
  const std::string header = PackHeader(static_cast<uint32_t>(entries_.size()));
  if (::pwrite(fd_, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size())) {
    return Errno("writing", temp_path_);
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha1(), nullptr) != 1) {
    return absl::InternalError("SHA-1 unavailable");
  }
  std::string chunk(kFlushAt, '\0');
  for (uint64_t at = 0; at < size_;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), size_ - at));
    RETURN_IF_ERROR(ReadAllAt(fd_, chunk.data(), n, at, temp_path_));
    EVP_DigestUpdate(ctx.get(), chunk.data(), n);
    at += n;
  }
  unsigned char digest[kChecksumSize];
  EVP_DigestFinal_ex(ctx.get(), digest, nullptr);
  return std::string(reinterpret_cast<const char*>(digest), kChecksumSize);
}

std::string PackWriter::BuildIndex(const std::string& pack_checksum) const {
  std::vector<uint32_t> order(entries_.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return std::memcmp(entries_[a].id.id, entries_[b].id.id, GIT_OID_RAWSZ) < 0;
  });
  std::string idx;
  idx.reserve(8 + 256 * 4 + entries_.size() * (GIT_OID_RAWSZ + 8) + 2 * kChecksumSize);
  idx.append("\377tOc", 4);
  PutBe32(&idx, 2);
  // Fan-out: how many ids start with a byte <= i.
  uint32_t counts[256] = {};
  for (const Entry& entry : entries_) ++counts[entry.id.id[0]];
  uint32_t running = 0;
  for (uint32_t count : counts) {
    running += count;
    PutBe32(&idx, running);
  }
  for (uint32_t i : order) idx.append(reinterpret_cast<const char*>(entries_[i].id.id), 20);
  for (uint32_t i : order) PutBe32(&idx, entries_[i].crc32);
  // Offsets past 2 GiB go to a table of 64-bit offsets, referenced with the high bit set.
  std::vector<uint64_t> large;
  for (uint32_t i : order) {
    const uint64_t offset = entries_[i].offset;
    if (offset < 0x80000000ull) {
      PutBe32(&idx, static_cast<uint32_t>(offset));
    } else {
      PutBe32(&idx, 0x80000000u | static_cast<uint32_t>(large.size()));
      large.push_back(offset);
    }
  }
  for (uint64_t offset : large) PutBe64(&idx, offset);
  idx.append(pack_checksum);
  unsigned char digest[kChecksumSize];
  SHA1(reinterpret_cast<const unsigned char*>(idx.data()), idx.size(), digest);
  idx.append(reinterpret_cast<const char*>(digest), kChecksumSize);
  return idx;
}

std::vector<git_oid> PackWriter::ObjectIds() const {
  std::vector<git_oid> ids;
  ids.reserve(entries_.size());
  for (const Entry& entry : entries_) ids.push_back(entry.id);
  return ids;
}

absl::StatusOr<std::optional<std::string>> PackWriter::Finish() {
  if (finished_) return absl::FailedPreconditionError("pack already finished");
  if (entries_.empty()) {
    finished_ = true;
    ::close(fd_);
    fd_ = -1;
    ::unlink(temp_path_.c_str());
    return std::nullopt;
  }
  ASSIGN_OR_RETURN(std::string checksum, PackChecksum());
  if (::pwrite(fd_, checksum.data(), checksum.size(), static_cast<off_t>(size_)) !=
      static_cast<ssize_t>(checksum.size())) {
    return Errno("writing", temp_path_);
  }
  if (::close(fd_) != 0) {
    fd_ = -1;
    return Errno("closing", temp_path_);
  }
  fd_ = -1;
  ASSIGN_OR_RETURN(std::string idx_temp, WriteTemp(pack_dir_, BuildIndex(checksum)));
  const std::string name = absl::StrCat(pack_dir_, "/pack-", absl::BytesToHexString(checksum));
  absl::Status installed = Install(temp_path_, name + ".pack");
  if (installed.ok()) installed = Install(idx_temp, name + ".idx");
  if (!installed.ok()) {
    ::unlink(idx_temp.c_str());
    return installed;
  }
  finished_ = true;
  return absl::BytesToHexString(checksum);
}

}  // namespace reverser::git
