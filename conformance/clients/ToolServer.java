// Runs Kafka tools' main methods one after another in one JVM, for conformance/clients/tool_server.py:
// a tool run costs its own work instead of a JVM start (1-3 s on a loaded machine).
//
// Protocol (the process's real stdin/stdout; one request at a time): a request is one line of
// base64 fields separated by spaces, the main class then its arguments; the answer is one line
// "DONE <exit status> <base64 stdout> <base64 stderr>". What a run prints to System.out and
// System.err is captured for it; System.in reads nothing (the tools run without input).
//
// The exit status is what the process would exit with: that of Exit.exit / Exit.halt (Kafka's
// org.apache.kafka.common.utils.Exit, which every Kafka tool exits through) or System.exit, 0 when
// main returns, 1 (with the JVM's "Exception in thread "main"" report) when it throws. As with a
// real exit, the thread that exits never runs on: it is parked for good, its finally blocks not run.
// Before the answer, as the JVM does before it exits: when main returned, the non-daemon threads the
// run started are waited for; unless it halted, the shutdown hooks it added run (VerifiableProducer
// closes its producer and prints its last acknowledgements in one).
// Each run has a thread named "main" of a hidden class (JEP 371), and main is called through a
// method handle: hidden frames are left out of stack traces, so a trace the tool prints ends at
// its main method as in a JVM of its own.
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.LockSupport;

public class ToolServer {
    /** Where System.out / System.err of the run in progress go. */
    static final class Switch extends OutputStream {
        volatile OutputStream target = OutputStream.nullOutputStream();
        @Override public void write(int b) throws java.io.IOException { target.write(b); }
        @Override public void write(byte[] b, int off, int len) throws java.io.IOException { target.write(b, off, len); }
        @Override public void flush() throws java.io.IOException { target.flush(); }
    }

    static volatile CompletableFuture<Integer> exited;
    static volatile Thread running;
    static volatile boolean halted;
    static volatile boolean exitCalled;

    /** What Exit.exit, Exit.halt and System.exit do here: report the status, never return. */
    static void exit(int status, boolean halt) {
        CompletableFuture<Integer> f = exited;
        if (f != null) {
            exitCalled = true;
            if (halt) {
                halted = true;
            }
            f.complete(status);
        }
        while (true) {
            LockSupport.park();
        }
    }

    @SuppressWarnings({"removal", "deprecation"})
    public static void main(String[] args) throws Throwable {
        PrintStream protocol = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        BufferedReader requests = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Switch out = new Switch(), err = new Switch();
        System.setOut(new PrintStream(out, true));
        System.setErr(new PrintStream(err, true));
        System.setIn(InputStream.nullInputStream());
        Class<?> exitClass = Class.forName("org.apache.kafka.common.utils.Exit");
        Class<?> procedure = Class.forName("org.apache.kafka.common.utils.Exit$Procedure");
        for (boolean halt : new boolean[]{false, true}) {
            Object toServer = java.lang.reflect.Proxy.newProxyInstance(ToolServer.class.getClassLoader(),
                new Class<?>[]{procedure}, (proxy, m, a) -> {
                    if (m.getDeclaringClass() == Object.class) {
                        return m.getName().equals("hashCode") ? 0 : m.getName().equals("equals") ? proxy == a[0] : "exit";
                    }
                    exit((Integer) a[0], halt);
                    return null;
                });
            exitClass.getMethod(halt ? "setHaltProcedure" : "setExitProcedure", procedure).invoke(null, toServer);
        }
        // the shutdown hooks a run adds (Exit.addShutdownHook's or Runtime's own, as the Verifiable*
        // tools do) are told from those of the JVM by a look at Runtime's list before and after it;
        // logging starts first, so that log4j's hook is the JVM's, not the first run's
        try {
            Class.forName("org.slf4j.LoggerFactory").getMethod("getLogger", String.class).invoke(null, "ToolServer");
        } catch (ReflectiveOperationException e) {
            // no SLF4J on the class path
        }
        Class<?> hooksClass = Class.forName("java.lang.ApplicationShutdownHooks");
        java.lang.reflect.Field hooksField = hooksClass.getDeclaredField("hooks");
        hooksField.setAccessible(true);
        @SuppressWarnings("unchecked")
        java.util.Map<Thread, Thread> hooks = (java.util.Map<Thread, Thread>) hooksField.get(null);
        System.setSecurityManager(new SecurityManager() {
            @Override public void checkPermission(java.security.Permission p) { }
            @Override public void checkPermission(java.security.Permission p, Object context) { }
            @Override public void checkExit(int status) {
                if (Thread.currentThread() == running) {
                    exit(status, false);
                }
            }
        });
        byte[] threadClass;
        try (InputStream in = ToolServer.class.getResourceAsStream("/ToolThread.class")) {
            threadClass = in.readAllBytes();
        }
        MethodHandles.Lookup hidden = MethodHandles.lookup().defineHiddenClass(threadClass, true);
        MethodHandle newThread = hidden.findConstructor(hidden.lookupClass(), MethodType.methodType(
            void.class, String.class, String[].class, CompletableFuture.class));
        protocol.println("READY");
        Base64.Decoder dec = Base64.getDecoder();
        Base64.Encoder enc = Base64.getEncoder();
        String line;
        while ((line = requests.readLine()) != null) {
            String[] fields = line.split(" ", -1);
            String mainClass = new String(dec.decode(fields[0]), StandardCharsets.UTF_8);
            String[] toolArgs = new String[fields.length - 1];
            for (int i = 1; i < fields.length; i++) {
                toolArgs[i - 1] = new String(dec.decode(fields[i]), StandardCharsets.UTF_8);
            }
            ByteArrayOutputStream stdout = new ByteArrayOutputStream(), stderr = new ByteArrayOutputStream();
            out.target = stdout;
            err.target = stderr;
            CompletableFuture<Integer> done = new CompletableFuture<>();
            java.util.Set<Thread> before = new java.util.HashSet<>(Thread.getAllStackTraces().keySet());
            java.util.Set<Thread> hooksBefore;
            synchronized (hooksClass) {   // as ApplicationShutdownHooks' own static synchronized methods
                hooksBefore = new java.util.HashSet<>(hooks.keySet());
            }
            exited = done;
            halted = false;
            exitCalled = false;
            Thread tool = (Thread) newThread.invoke(mainClass, toolArgs, done);
            running = tool;
            tool.start();
            int status = done.get();
            exited = null;
            running = null;
            if (!exitCalled) {   // (an exit does not wait for other threads)
                // main returned: the JVM exits once the non-daemon threads the run started are done
                for (Thread t : Thread.getAllStackTraces().keySet()) {
                    if (!before.contains(t) && !t.isDaemon() && t != tool) {
                        t.join();
                    }
                }
            }
            if (!halted) {
                // then runs the shutdown hooks the run added, concurrently
                java.util.List<Thread> added = new java.util.ArrayList<>();
                java.util.List<Thread> now;
                synchronized (hooksClass) {
                    now = new java.util.ArrayList<>(hooks.keySet());
                }
                for (Thread h : now) {
                    if (!hooksBefore.contains(h)) {
                        Runtime.getRuntime().removeShutdownHook(h);
                        added.add(h);
                    }
                }
                for (Thread h : added) {
                    h.start();
                }
                for (Thread h : added) {
                    h.join();
                }
            }
            System.out.flush();
            System.err.flush();
            out.target = OutputStream.nullOutputStream();
            err.target = OutputStream.nullOutputStream();
            protocol.println("DONE " + status + " " + enc.encodeToString(stdout.toByteArray()) + " "
                             + enc.encodeToString(stderr.toByteArray()));
        }
        System.exit(0);   // stdin closed: the Python side is gone
    }
}

/** One run's thread (defined as a hidden class by ToolServer): main(args) of mainClass. */
class ToolThread extends Thread {
    private final String mainClass;
    private final String[] args;
    private final CompletableFuture<Integer> done;

    ToolThread(String mainClass, String[] args, CompletableFuture<Integer> done) {
        super("main");
        setDaemon(true);
        this.mainClass = mainClass;
        this.args = args;
        this.done = done;
    }

    @Override public void run() {
        MethodHandle main;
        try {
            main = MethodHandles.publicLookup().findStatic(Class.forName(mainClass), "main",
                                                          MethodType.methodType(void.class, String[].class));
        } catch (ReflectiveOperationException e) {   // as the java launcher reports it
            System.err.println("Error: Could not find or load main class " + mainClass);
            System.err.println("Caused by: " + e);
            done.complete(1);
            return;
        }
        try {
            main.invokeExact(args);
            done.complete(0);
        } catch (Throwable t) {
            System.err.print("Exception in thread \"main\" ");
            t.printStackTrace(System.err);
            done.complete(1);
        }
    }
}
