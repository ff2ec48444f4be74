// Truth program for attribution: each function of its own allocates through one container of
// the C++ standard library; it prints the bytes and allocations each makes.
#include <array>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#define NOINLINE __attribute__((noinline))

static void report(const char *fn, unsigned long allocs, unsigned long bytes) {
    std::printf("own: fn=%s allocs=%lu bytes=%lu\n", fn, allocs, bytes);
}

// A function that calls operator new itself: no library function between.
static void report_direct(const char *fn, unsigned long allocs, unsigned long bytes) {
    std::printf("own: fn=%s allocs=%lu bytes=%lu direct=1\n", fn, allocs, bytes);
}

NOINLINE std::vector<int> *fill_vector() {
    auto *v = new std::vector<int>();  // 24 bytes, charged here
    v->reserve(1000);
    for (int i = 0; i < 1000; i++) v->push_back(i);
    report("fill_vector", 2, sizeof(std::vector<int>) + 1000 * sizeof(int));
    return v;
}

NOINLINE std::string make_string() {
    std::string s(1000, 'x');
    report("make_string", 1, 1001);
    return s;
}

NOINLINE std::map<int, int> build_map() {
    std::map<int, int> m;
    for (int i = 0; i < 10; i++) m[i] = i;
    report("build_map", 10, 10 * sizeof(std::_Rb_tree_node<std::pair<const int, int>>));
    return m;
}

NOINLINE std::unordered_map<int, int> build_hash() {
    std::unordered_map<int, int> u;
    u.reserve(100);
    for (int i = 0; i < 100; i++) u[i] = i;
    report("build_hash", 101,
           u.bucket_count() * sizeof(void *) + 100 * sizeof(std::__detail::_Hash_node<std::pair<const int, int>, false>));
    return u;
}

NOINLINE std::shared_ptr<std::array<char, 100>> share() {
    auto p = std::make_shared<std::array<char, 100>>();
    using Block = std::_Sp_counted_ptr_inplace<std::array<char, 100>, std::allocator<void>, __gnu_cxx::_S_atomic>;
    report("share", 1, sizeof(Block));
    return p;
}

// std::function keeps a capture larger than its local buffer (16 bytes) on the heap, from
// libstdc++'s _M_create, which GCC's DWARF names without its class.
NOINLINE std::function<long()> keep_callback(long a) {
    long b = a + 1, c = a + 2, d = a + 3;
    std::function<long()> f = [a, b, c, d] { return a + b + c + d; };
    report("keep_callback", 1, 4 * sizeof(long));
    return f;
}

// Two lambdas that allocate: each is its own function, named after the one it belongs to.
NOINLINE long lambdas() {
    // (Each writes to its block, so that its call of operator new is no tail call.)
    auto small = [](int n) __attribute__((noinline)) { char *p = new char[n]; p[0] = 1; return p; };
    auto large = [](int n) __attribute__((noinline)) { long *p = new long[n]; p[0] = 2; return p; };
    long sum = 0;
    for (int i = 0; i < 3; i++) {
        char *p = small(100);
        long *q = large(50);
        sum += p[0] + q[0];
        delete[] p;
        delete[] q;
    }
    report_direct("lambdas()::{lambda(int)#1}", 3, 300);
    report_direct("lambdas()::{lambda(int)#2}", 3, 3 * 50 * sizeof(long));
    return sum;
}

int main() {
    auto *v = fill_vector();
    auto s = make_string();
    auto m = build_map();
    auto u = build_hash();
    auto p = share();
    auto f = keep_callback(1);
    long l = lambdas();
    std::printf("own: done=%zu\n", v->size() + s.size() + m.size() + u.size() + p->size() + f() + l);
    delete v;
    return 0;
}
