// Truth program for names of inlined C++ functions that DWARF gives only a short name (no
// linkage name: internal linkage). Built with -O2, every function below but the noinline ones
// is inlined into its caller: two methods named `make` of classes in an anonymous namespace,
// and two lambdas, each allocating a known number of bytes. Each must be its own row:
//   (anonymous namespace)::Parser::make    100 bytes
//   (anonymous namespace)::Renderer::make  200 bytes
//   parse()'s lambda                       1000 bytes (a std::vector<char> of 1000)
//   render()'s lambda                      2000 bytes (a std::vector<long> of 250)
#include <cstdio>
#include <cstdlib>
#include <vector>

static volatile long sink;

namespace {
struct Parser {
    void *make(int n) {
        void *p = malloc(n);
        sink += (long)p;
        return p;
    }
};
struct Renderer {
    void *make(int n) {
        void *p = malloc(n);
        sink += 3 * (long)p;
        return p;
    }
};
}  // namespace

__attribute__((noinline)) void a() {
    Parser p;
    free(p.make(100));
}

__attribute__((noinline)) void b() {
    Renderer r;
    free(r.make(200));
}

__attribute__((noinline)) void parse() {
    auto l = [](int n) {
        std::vector<char> v(n);
        sink += v.size();
    };
    l(1000);
}

__attribute__((noinline)) void render() {
    auto l = [](int n) {
        std::vector<long> v(n);
        sink += v.size() * 3;
    };
    l(250);
}

int main() {
    a();
    b();
    parse();
    render();
    std::printf("inlined_scopes: parser=100 renderer=200 parse_lambda=1000 render_lambda=2000\n");
    return 0;
}
