// A MongoDB-compatible server for tests and CI (mongo-java-server with its
// H2 file backend), where no real MongoDB or container engine is available.
//
// Usage: java -cp 'lib/*:classes' CompatMongo <host> <port|0> <data-file>
// Prints "listening <port>" once it accepts connections; a SIGTERM closes the
// data file cleanly so a restart on the same file finds every record.
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.backend.h2.H2Backend;
import java.net.InetSocketAddress;
import java.util.List;

public final class CompatMongo {
  // The Node.js driver v7 refuses servers below wire version 9 (MongoDB 4.4);
  // mongo-java-server 1.47 announces 8 at most, while everything our stores
  // send works on it, so it announces MongoDB 5.0 (wire version 13).
  private static final MongoVersion ANNOUNCED = new MongoVersion() {
    @Override
    public List<Integer> getVersionArray() {
      return List.of(5, 0, 0);
    }

    @Override
    public int getWireVersion() {
      return 13;
    }
  };

  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: CompatMongo <host> <port|0> <data-file>");
      System.exit(2);
    }
    H2Backend backend = new H2Backend(args[2]);
    backend.version(ANNOUNCED);
    MongoServer server = new MongoServer(backend);
    // Few threads: it shares two cores with the whole test suite.
    server.bind(new InetSocketAddress(args[0], Integer.parseInt(args[1])), 1, 2);
    InetSocketAddress bound = server.getLocalAddress();
    Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow));
    System.out.println("listening " + bound.getPort());
    System.out.flush();
    Thread.currentThread().join();
  }
}
