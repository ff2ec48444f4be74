// C++ thread_local objects whose destructors allocate, beside a pthread key destructor that
// allocates: 16 threads x 10 thread_local objects each malloc(2222) and free it when they are
// destroyed at thread exit; each thread's key destructor mallocs(1111) and frees it.
//
//   hostile_tls: threads=16 allocs_2222=160 allocs_1111=16
#include <pthread.h>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

struct Holder {
    int id = 0;
    ~Holder() {
        void *volatile p = std::malloc(2222);
        std::free(p);
    }
};

thread_local Holder holders[10];
static pthread_key_t key;

static void on_key(void *) {
    void *volatile p = std::malloc(1111);
    std::free(p);
}

int main() {
    pthread_key_create(&key, on_key);
    std::vector<std::thread> threads;
    for (int i = 0; i < 16; i++)
        threads.emplace_back([i] {
            for (auto &h : holders) h.id = i;
            pthread_setspecific(key, &key);
        });
    for (auto &t : threads) t.join();
    std::printf("hostile_tls: threads=16 allocs_2222=160 allocs_1111=16\n");
    return 0;
}
