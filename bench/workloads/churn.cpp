// Allocation churn through the C++ standard library, for bench/compare: each thread walks down a
// call chain 10 to 30 frames deep and there builds and tears down std::map / std::string /
// std::vector objects. Usage: churn THREADS TOTAL_ALLOCATIONS_APPROX
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

static thread_local unsigned long long rng = 88172645463325252ULL;
static unsigned next_rand() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return static_cast<unsigned>(rng);
}

__attribute__((noinline)) static size_t work(std::map<std::string, std::vector<int>>& m) {
    std::string key = "key-with-a-heap-sized-name-" + std::to_string(next_rand() % 4096);
    auto& v = m[key];
    for (int i = 0; i < 4; i++) v.push_back(i);  // 3 growth reallocations
    if (m.size() > 512) m.erase(m.begin());
    return v.size();
}

template <int N>
__attribute__((noinline)) size_t descend(std::map<std::string, std::vector<int>>& m, int depth) {
    if (depth <= 0) return work(m);
    return descend<(N + 1) % 8>(m, depth - 1) + 1;
}

static void run(long iterations, unsigned seed) {
    rng ^= seed * 0x9E3779B97F4A7C15ULL;
    std::map<std::string, std::vector<int>> m;
    size_t sink = 0;
    for (long i = 0; i < iterations; i++) sink += descend<0>(m, 10 + next_rand() % 21);
    if (sink == 42) std::puts("");
}

int main(int argc, char** argv) {
    int threads = argc > 1 ? std::atoi(argv[1]) : 1;
    long total = argc > 2 ? std::atol(argv[2]) : 10000000;
    long per_iteration = 5;  // key string, map node, vector growth (about 3)
    long iterations = total / per_iteration / threads;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; t++) pool.emplace_back(run, iterations, static_cast<unsigned>(t + 1));
    for (auto& th : pool) th.join();
    std::printf("churn: threads=%d iterations=%ld\n", threads, iterations * threads);
    return 0;
}
