#include "shardtrain/comm/string_collectives.hpp"

#include <algorithm>
#include <cstdint>

namespace shardtrain {

void broadcast_string(std::string& s, Communicator& comm) {
  std::int64_t len = std::int64_t(s.size());
  comm.broadcast(&len, 1, 0);
  s.resize(std::size_t(len));
  if (len > 0) comm.broadcast(reinterpret_cast<std::uint8_t*>(s.data()), s.size(), 0);
}

std::vector<std::string> all_gather_strings(const std::string& mine, Communicator& comm) {
  const std::size_t size = std::size_t(comm.size());
  const std::int64_t my_len = std::int64_t(mine.size());
  std::vector<std::int64_t> lens(size);
  comm.all_gather(&my_len, lens.data(), 1);
  const std::size_t longest = std::size_t(*std::max_element(lens.begin(), lens.end()));
  std::vector<std::string> out(size);
  if (longest == 0) return out;
  std::vector<std::uint8_t> padded(longest, 0), all(size * longest);
  std::copy(mine.begin(), mine.end(), padded.begin());
  comm.all_gather(padded.data(), all.data(), longest);
  for (std::size_t r = 0; r < size; ++r) {
    const auto* first = all.data() + r * longest;
    out[r].assign(first, first + lens[r]);
  }
  return out;
}

}  // namespace shardtrain
