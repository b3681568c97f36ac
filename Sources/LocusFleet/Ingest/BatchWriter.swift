#if canImport(Glibc)
import Glibc
#endif

/// The ingest's second thread: it writes one batch to PostgreSQL while the ingest's own thread
/// reads and parses the next from the broker (docs/fleet.md, "Where the time goes": a worker
/// that did both in turn spent half its time waiting on PostgreSQL and PostgreSQL half its
/// time waiting on it).
///
///     ingest thread:  read + parse batch 2   | acknowledge 1 | read + parse batch 3   | ...
///     writer thread:  write + COMMIT batch 1 |               | write + COMMIT batch 2 | ...
///
/// One batch at a time: the ingest acknowledges a batch once its COMMIT has returned and before
/// it hands over the next, so messages are acknowledged in batch order, each only after its
/// batch is stored. The work and its result pass under one mutex; the work's objects (the
/// batch, the database connection) are touched by one thread at a time, the writer's while a
/// batch is with it. The work leaves its outcome where its closure says; `take` returning true
/// means the work has ended, and everything it wrote is visible to the caller (the mutex).
final class BatchWriter: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var thread = pthread_t()
    /// Under the mutex: the work given and not started, its outcome once done, and whether a
    /// piece of work is with the writer (given and its outcome not yet taken).
    private var work: (() -> Void)? = nil
    private var done = false
    private var busy = false
    private var quitting = false

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(changed, &attributes)
        pthread_condattr_destroy(&attributes)
        // The thread holds the writer until `stop` lets it end.
        let context = Unmanaged.passRetained(self).toOpaque()
        let made = pthread_create(&thread, nil, { context in
            let writer = Unmanaged<BatchWriter>.fromOpaque(context!).takeRetainedValue()
            writer.loop()
            return nil
        }, context)
        precondition(made == 0, "the ingest cannot start its writer thread (error \(made))")
    }

    deinit {
        pthread_cond_destroy(changed)
        pthread_mutex_destroy(mutex)
        changed.deallocate()
        mutex.deallocate()
    }

    /// Gives the writer `work`; it must not be busy.
    func start(_ work: @escaping () -> Void) {
        locked {
            precondition(!busy, "a batch is already being written")
            self.work = work
            busy = true
            pthread_cond_broadcast(changed)
        }
    }

    /// True once the work given has ended, waiting for that at most `waitMs` (0: not at all;
    /// nil: as long as it takes); false while it runs, or when nothing was given. After a true,
    /// the writer is free.
    func take(waitMs: Int64?) -> Bool {
        locked {
            if busy && !done, let waitMs {
                if waitMs > 0 {
                    var deadline = timespec()
                    clock_gettime(CLOCK_MONOTONIC, &deadline)
                    let nanoseconds = Int64(deadline.tv_nsec) + waitMs * 1_000_000
                    deadline.tv_sec += Int(nanoseconds / 1_000_000_000)
                    deadline.tv_nsec = Int(nanoseconds % 1_000_000_000)
                    while !done && pthread_cond_timedwait(changed, mutex, &deadline) == 0 {}
                }
            } else {
                while busy && !done { pthread_cond_wait(changed, mutex) }
            }
            guard busy && done else { return false }
            done = false
            busy = false
            return true
        }
    }

    /// Waits for the work given, if any, and ends the thread.
    func stop() {
        _ = take(waitMs: nil)
        locked {
            quitting = true
            pthread_cond_broadcast(changed)
        }
        pthread_join(thread, nil)
    }

    private func loop() {
        while true {
            let next: (() -> Void)? = locked {
                while work == nil && !quitting { pthread_cond_wait(changed, mutex) }
                defer { work = nil }
                return work
            }
            guard let next else { return }
            next()
            locked {
                done = true
                pthread_cond_broadcast(changed)
            }
        }
    }

    private func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }
}
