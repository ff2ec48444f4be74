// cxx_new.cpp - C++ allocation through operator new / new[] / new(nothrow) and their deletes,
// beside plain malloc, with members allocated in a constructor.
//
// Every allocation and deallocation expression in this file bumps a counter next to it, and
// the program prints the counters, so tests compare heaplens's per-entry-point counts with the
// program's own:
//
//     cxx_new: iterations=1000 new=... new_array=... new_nothrow=... delete=... delete_array=...
//       malloc=... free=... kept_buffers=... buffer_size=... meta_size=... node_size=...
//
// `delete p` may reach operator delete(void*) or, with sized deallocation (the default from
// C++14), operator delete(void*, size_t); `delete[] p` likewise. The counters count
// expressions, so a test adds the sized and unsized forms together.
//
// Build with -O0 (or keep every pointer observable): C++14 lets a compiler elide a new/delete
// pair whose result is never used.
//
// Usage: cxx_new [ITERATIONS]   (default 1000; every 10th Buffer is kept, i.e. leaked)
#include <cstdio>
#include <cstdlib>
#include <new>

static long n_new, n_new_array, n_new_nothrow, n_delete, n_delete_array, n_malloc, n_free;

struct Meta {  // 56 bytes
    double v[7];
};

struct Node {  // 40 bytes, with a destructor: new Node[k] stores an array cookie
    long key[5];
    ~Node() { key[0] = -1; }
};

class Buffer {  // 32 bytes; its constructor allocates two members
  public:
    explicit Buffer(unsigned long n) : data_(new char[n]), size_(n), meta_(new Meta()), next_(nullptr)
    {
        n_new_array++;  // data_
        n_new++;        // meta_
        data_[0] = 'x';
    }
    ~Buffer()
    {
        delete[] data_;
        n_delete_array++;
        delete meta_;
        n_delete++;
    }
    Buffer *next() const { return next_; }
    void set_next(Buffer *b) { next_ = b; }

  private:
    char *data_;
    unsigned long size_;
    Meta *meta_;
    Buffer *next_;
};

static Buffer *kept_list;  // leaked Buffers stay reachable from here

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? std::atol(argv[1]) : 1000;
    long kept = 0;

    std::setvbuf(stdout, nullptr, _IONBF, 0);

    for (long i = 0; i < iterations; i++) {
        Buffer *b = new Buffer(300);
        n_new++;
        int *ints = new int[25];
        n_new_array++;
        ints[3] = (int)i;
        Node *nodes = new Node[4];
        n_new_array++;
        nodes[1].key[0] = i;
        Meta *m = new (std::nothrow) Meta();
        n_new_nothrow++;
        if (m == nullptr)
            return 2;
        m->v[0] = (double)ints[3];

        if (i % 10 == 9) {
            b->set_next(kept_list);
            kept_list = b;
            kept++;
        } else {
            delete b;
            n_delete++;
        }
        delete[] ints;
        n_delete_array++;
        delete[] nodes;
        n_delete_array++;
        delete m;
        n_delete++;
    }

    void *blocks[5];
    for (int i = 0; i < 5; i++) {
        blocks[i] = std::malloc(1000);
        n_malloc++;
    }
    for (int i = 0; i < 5; i++) {
        std::free(blocks[i]);
        n_free++;
    }

    std::printf("cxx_new: iterations=%ld new=%ld new_array=%ld new_nothrow=%ld delete=%ld "
                "delete_array=%ld malloc=%ld free=%ld kept_buffers=%ld buffer_size=%zu "
                "meta_size=%zu node_size=%zu\n",
                iterations, n_new, n_new_array, n_new_nothrow, n_delete, n_delete_array, n_malloc,
                n_free, kept, sizeof(Buffer), sizeof(Meta), sizeof(Node));
    return 0;
}
