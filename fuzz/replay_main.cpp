// fuzz_replay TARGET PATH...: feeds every file under each PATH (a file or a folder, recursively, in
// sorted order) to the fuzz target TARGET, one call per file, the way libFuzzer would. A finding
// aborts (fuzz_support.hpp), after the file's name is printed. Exits 0 when every file passed, 2 on
// a usage error, an unknown target, or no file at all (an empty corpus would check nothing).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_support.hpp"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 3) {
    std::fprintf(stderr, "usage: fuzz_replay TARGET FILE_OR_FOLDER...\n");
    return 2;
  }
  const std::string target = argv[1];
  const shardtrain::fuzz::TargetBody body = shardtrain::fuzz::find_target(target);
  if (!body) {
    std::fprintf(stderr, "fuzz_replay: no fuzz target '%s' (fuzz/targets/%s.cpp)\n", target.c_str(), target.c_str());
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    const fs::path root = argv[i];
    if (fs::is_directory(root)) {
      for (const auto& entry : fs::recursive_directory_iterator(root))
        if (entry.is_regular_file()) files.push_back(entry.path());
    } else if (fs::is_regular_file(root)) {
      files.push_back(root);
    } else {
      std::fprintf(stderr, "fuzz_replay: %s: no such file or folder\n", root.c_str());
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "fuzz_replay: %s: no input to replay\n", target.c_str());
    return 2;
  }
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "fuzz_replay %s: %s (%zu bytes)\n", target.c_str(), file.c_str(), bytes.size());
    body(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("fuzz_replay %s: %zu inputs, every one read or refused with a typed error naming it\n", target.c_str(),
              files.size());
  return 0;
}
