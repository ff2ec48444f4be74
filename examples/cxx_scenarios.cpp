// cxx_scenarios.cpp - C++ classes that allocate in each of mtrace++'s invocation scenarios, a
// known number of times with a size of their own, so `heaplens report --cxx` can be checked
// table by table against the truth this program prints.
//
//   scenario            where                                   entry     size  times
//   constructor         Buffer::Buffer(unsigned long)           new[]      100      3
//   copy constructor    Buffer::Buffer(Buffer const&)           new[]      101      4
//   assignment          Buffer::operator=(Buffer const&)        new[]      102      5
//   type conversion     Buffer::operator char*() const          malloc     103      6
//   member data         Buffer::Buffer inside Owner::Owner()    new[]      200      7
//   member function     Registry::make()                        new[]      300      8
//   member function     Registry::grow(): std::vector growth    new        8..64    4
//   member function     Inner::step() called by Outer::run()    new[]      500      2
//   outside classes     make_block(), a free function           malloc     400      9
//
// Registry::grow pushes 8 longs onto an empty std::vector, which (libstdc++ doubling from 1)
// allocates 8, 16, 32 and 64 bytes through std:: frames that the tables skip.
//
// Built with -O2 -g; the functions that allocate are kept out of line, and callers of member
// functions do work after the call (no tail call), so every scenario keeps its frames. Prints
// one line per scenario:
//
//     cxx_scenarios: scenario=NAME first=... lowest=... count=N bytes=B size=S entry=E path=P
//
// where `first` and `lowest` are the first-level and lowest-level scenarios mtrace++ would
// give, and `path` the class member functions from outermost to innermost joined by '>'.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define NOINLINE __attribute__((noinline))
// After a call, so that it is no tail call and its caller keeps a frame on the stack.
#define KEEP_FRAME() asm volatile("" ::: "memory")

class Buffer {
  public:
    NOINLINE explicit Buffer(unsigned long n) : data_(new char[n]), size_(n) { memset(data_, 1, n); }
    NOINLINE Buffer(const Buffer &o) : data_(new char[o.size_ + 1]), size_(o.size_ + 1)
    {
        memcpy(data_, o.data_, o.size_);
    }
    NOINLINE Buffer &operator=(const Buffer &o)
    {
        if (this != &o) {
            char *fresh = new char[o.size_ + 2];
            memcpy(fresh, o.data_, o.size_);
            delete[] data_;
            data_ = fresh;
            size_ = o.size_ + 2;
        }
        return *this;
    }
    NOINLINE operator char *() const
    {
        char *s = static_cast<char *>(malloc(size_ + 3));
        memcpy(s, data_, size_);
        return s;
    }
    NOINLINE ~Buffer() { delete[] data_; }
    unsigned long size() const { return size_; }

  private:
    char *data_;
    unsigned long size_;
};

class Owner {
  public:
    NOINLINE Owner() : buf_(200) { KEEP_FRAME(); }
    unsigned long size() const { return buf_.size(); }

  private:
    Buffer buf_;
};

class Registry {
  public:
    NOINLINE char *make()
    {
        char *p = new char[300];
        p[0] = 1;
        return p;
    }
    NOINLINE unsigned long grow()
    {
        for (long i = 0; i < 8; i++)
            items_.push_back(i);
        return items_.size();
    }

  private:
    std::vector<long> items_;
};

class Inner {
  public:
    NOINLINE char *step()
    {
        char *p = new char[500];
        p[0] = 2;
        return p;
    }
};

class Outer {
  public:
    NOINLINE char *run()
    {
        char *p = inner_.step();
        KEEP_FRAME();
        return p;
    }

  private:
    Inner inner_;
};

NOINLINE static char *make_block()
{
    char *p = static_cast<char *>(malloc(400));
    p[0] = 3;
    return p;
}

// `size` is each allocation's; `bytes` their sum (0: count * size).
static void truth(const char *scenario, const char *first, const char *lowest, int count, long size,
                  const char *entry, const char *path, long bytes = 0)
{
    printf("cxx_scenarios: scenario=%s first=%s lowest=%s count=%d bytes=%ld size=%ld entry=%s path=%s\n",
           scenario, first, lowest, count, bytes ? bytes : count * size, size, entry, path);
}

int main()
{
    volatile unsigned long sink = 0;
    std::vector<Buffer *> bufs;
    bufs.reserve(64);  // one allocation from main: outside classes, 512 bytes
    for (int i = 0; i < 3; i++)
        bufs.push_back(new Buffer(100));  // new Buffer: 16 bytes from main, then the constructor's 100
    for (int i = 0; i < 4; i++)
        bufs.push_back(new Buffer(*bufs[0]));  // 16 bytes from main, the copy constructor's 101
    for (int i = 0; i < 5; i++)
        *bufs[3 + i % 4] = *bufs[0];  // 102 each
    for (int i = 0; i < 6; i++) {
        char *s = *bufs[0];  // 103 each
        sink += s[0];
        free(s);
    }
    std::vector<Owner *> owners;
    owners.reserve(8);  // 64 bytes from main
    for (int i = 0; i < 7; i++)
        owners.push_back(new Owner());  // 16 bytes from main, 200 from Buffer::Buffer in Owner::Owner
    Registry reg;
    for (int i = 0; i < 8; i++)
        delete[] reg.make();
    sink += reg.grow();
    Outer outer;
    for (int i = 0; i < 2; i++)
        delete[] outer.run();
    for (int i = 0; i < 9; i++)
        free(make_block());

    truth("constructor", "constructor", "constructor", 3, 100, "new[]", "Buffer::Buffer");
    truth("copy", "copy_constructor", "copy_constructor", 4, 101, "new[]", "Buffer::Buffer");
    truth("assignment", "assignment", "assignment", 5, 102, "new[]", "Buffer::operator=");
    truth("conversion", "conversion", "conversion", 6, 103, "malloc", "Buffer::operator_char*");
    truth("member_data", "constructor", "member_data", 7, 200, "new[]", "Owner::Owner>Buffer::Buffer");
    truth("member_function", "member_function", "member_function", 8, 300, "new[]", "Registry::make");
    truth("vector_growth", "member_function", "member_function", 4, 0, "new", "Registry::grow", 8 + 16 + 32 + 64);
    truth("nested", "member_function", "member_function", 2, 500, "new[]", "Outer::run>Inner::step");
    truth("free_function", "others", "others", 9, 400, "malloc", "-");
    // From main itself: the 14 `new Buffer`/`new Owner` objects and the two reserves.
    truth("main", "others", "others", 14 + 2, 0, "-", "-");
    printf("cxx_scenarios: totals classes_bytes=%ld main_new_objects=14 object_size=%zu sink=%lu\n",
           3 * 100L + 4 * 101 + 5 * 102 + 6 * 103 + 7 * 200 + 8 * 300 + 120 + 2 * 500, sizeof(Buffer),
           (unsigned long)sink);
    for (Buffer *b : bufs)
        delete b;
    for (Owner *o : owners)
        delete o;
    return 0;
}
