/* Entry points that end or replace the process or a thread, interposed in C: the exec family
 * has variadic members (stable Rust cannot define those), and pthread_exit unwinds through its
 * caller's frames (forced unwinding), which a C frame with unwind tables lets pass.
 *
 * Each tells the monitor (src/lifetime.rs) first, then calls the next definition. They are
 * hidden here: rustc exports only Rust's symbols from the cdylib, so src/lifetime.rs exports
 * each name as a stub that jumps here, registers and stack untouched (variadic arguments
 * included). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

/* In src/lifetime.rs. */
void heaplens_before_exec(void);
void heaplens_main_thread_exit(void);
void *heaplens_attached_real(const char *name);

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);

/* Attached to a running process (heaplens attach), the monitor is in no scope of the program's
 * and RTLD_NEXT means nothing: the attach's own lookup then says where the function is. */
static void *next(const char *name)
{
    void *attached = heaplens_attached_real(name);
    return attached ? attached : dlsym(RTLD_NEXT, name);
}

#define NEXT(type, name)                                                                         \
    static type real;                                                                            \
    if (!real) real = (type)next(name);                                                          \
    if (!real) { errno = ENOSYS; return -1; }

__attribute__((visibility("hidden"))) int hl_execve(const char *path, char *const argv[], char *const envp[])
{
    NEXT(execve_fn, "execve");
    heaplens_before_exec();
    return real(path, argv, envp);
}

__attribute__((visibility("hidden"))) int hl_execv(const char *path, char *const argv[])
{
    NEXT(execv_fn, "execv");
    heaplens_before_exec();
    return real(path, argv);
}

__attribute__((visibility("hidden"))) int hl_execvp(const char *file, char *const argv[])
{
    NEXT(execv_fn, "execvp");
    heaplens_before_exec();
    return real(file, argv);
}

__attribute__((visibility("hidden"))) int hl_execvpe(const char *file, char *const argv[], char *const envp[])
{
    NEXT(execve_fn, "execvpe");
    heaplens_before_exec();
    return real(file, argv, envp);
}

__attribute__((visibility("hidden"))) int hl_fexecve(int fd, char *const argv[], char *const envp[])
{
    NEXT(fexecve_fn, "fexecve");
    heaplens_before_exec();
    return real(fd, argv, envp);
}

__attribute__((visibility("hidden"))) int hl_execveat(int dirfd, const char *path, char *const argv[],
                                                    char *const envp[], int flags)
{
    NEXT(execveat_fn, "execveat");
    heaplens_before_exec();
    return real(dirfd, path, argv, envp, flags);
}

/* The execl forms gather their arguments as glibc's do (on the stack: no allocation) and go on
 * as execve / execvp. */
static size_t count_args(const char *arg, va_list ap)
{
    size_t n = 1;
    while (arg && va_arg(ap, const char *)) n++;
    return arg ? n : 0;
}

#define GATHER(argv, arg, last)                                                                  \
    va_list ap;                                                                                  \
    va_start(ap, last);                                                                          \
    size_t n = count_args(arg, ap);                                                              \
    va_end(ap);                                                                                  \
    char *argv[n + 1];                                                                           \
    va_start(ap, last);                                                                          \
    argv[0] = (char *)arg;                                                                       \
    for (size_t i = 1; i <= n; i++) argv[i] = va_arg(ap, char *);                                \
    argv[n] = NULL;

__attribute__((visibility("hidden"))) int hl_execl(const char *path, const char *arg, ...)
{
    GATHER(argv, arg, arg);
    va_end(ap);
    return hl_execve(path, argv, environ);
}

__attribute__((visibility("hidden"))) int hl_execlp(const char *file, const char *arg, ...)
{
    GATHER(argv, arg, arg);
    va_end(ap);
    return hl_execvp(file, argv);
}

__attribute__((visibility("hidden"))) int hl_execle(const char *path, const char *arg, ...)
{
    GATHER(argv, arg, arg);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return hl_execve(path, argv, envp);
}

/* The main thread leaving with pthread_exit: the process now ends with its last thread, which
 * the monitor's writer thread must not keep alive. */
__attribute__((visibility("hidden"), noreturn)) void hl_pthread_exit(void *retval)
{
    static void (*real)(void *);
    if (!real) real = (void (*)(void *))next("pthread_exit");
    if (syscall(SYS_gettid) == getpid()) heaplens_main_thread_exit();
    if (real) real(retval);
    abort();
}
