// Logs in the way a Java application does, with exactly the settings shiqi-connect prints:
// a JDBC URL (`shiqi-connect jdbc NAME`) and a Kafka client.properties (the profile's).
//
//   java -jar shiqi-jdbc-check.jar JDBC_URL|- [--kafka client.properties]
//   java -jar shiqi-jdbc-check.jar --kafka client.properties
//
// `-` reads the URL from the first line of stdin, so the keystore password it may hold never
// sits in a command line (`ps` shows those to every user). Prints, on stdout:
//   driver=<the driver class that took the URL> <its version>
//   current_user=<SELECT CURRENT_USER()>
//   topic=<name>                      (one line per topic, sorted)
// Exit 0 when every asked login worked; 1 with `error: …` on stderr otherwise; 2 on bad usage.
package dev.shiqi.jdbc;

import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.Driver;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListTopicsOptions;

public final class Check {
    private static final String USAGE =
        "usage: shiqi-jdbc-check JDBC_URL|- [--kafka CLIENT_PROPERTIES]\n"
            + "       shiqi-jdbc-check --kafka CLIENT_PROPERTIES";

    private Check() {}

    public static void main(String[] args) {
        String url = null;
        String kafka = null;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--kafka") && i + 1 < args.length) {
                kafka = args[++i];
            } else if (a.equals("-h") || a.equals("--help")) {
                System.out.println(USAGE);
                return;
            } else if (url == null && (a.equals("-") || a.startsWith("jdbc:"))) {
                url = a;
            } else {
                usage("unexpected argument `" + a + "`");
            }
        }
        if (url == null && kafka == null) {
            usage("give a JDBC URL (or `-` to read it from stdin), `--kafka FILE`, or both");
        }
        try {
            if (url != null) {
                mysql(url.equals("-") ? readUrl() : url);
            }
            if (kafka != null) {
                topics(kafka);
            }
        } catch (Exception e) {
            String last = oneLine(e);
            System.err.println("error: " + last);
            // Drivers wrap one cause in several exceptions with the same words: show each once.
            for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
                String line = oneLine(c);
                if (!last.contains(line) && !line.endsWith(last)) {
                    System.err.println("  caused by: " + line);
                }
                last = line;
            }
            System.exit(1);
        }
    }

    private static void usage(String why) {
        System.err.println("error: " + why + "\n" + USAGE);
        System.exit(2);
    }

    private static String readUrl() throws IOException {
        BufferedReader in =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line = in.readLine();
        if (line == null || !line.trim().startsWith("jdbc:")) {
            throw new IOException("stdin holds no JDBC URL (expected a line starting `jdbc:`)");
        }
        return line.trim();
    }

    private static void mysql(String url) throws SQLException {
        // Both drivers are on the class path; DriverManager hands the URL to the one that
        // accepts its scheme (MariaDB Connector/J 3 refuses `jdbc:mysql:` unless told otherwise).
        Driver driver = DriverManager.getDriver(url);
        System.out.println("driver=" + driver.getClass().getName() + " "
            + driver.getMajorVersion() + "." + driver.getMinorVersion());
        // No user or password here: the URL carries the user, the certificate is the credential.
        try (Connection c = DriverManager.getConnection(url);
             Statement s = c.createStatement();
             ResultSet r = s.executeQuery("SELECT CURRENT_USER()")) {
            if (!r.next()) {
                throw new SQLException("SELECT CURRENT_USER() returned no row");
            }
            System.out.println("current_user=" + r.getString(1));
        }
    }

    private static void topics(String file) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(file)) {
            props.load(in);
        }
        props.putIfAbsent(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.putIfAbsent(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(props)) {
            TreeSet<String> names = new TreeSet<>(
                admin.listTopics(new ListTopicsOptions().listInternal(false))
                    .names()
                    .get(45, TimeUnit.SECONDS));
            for (String n : names) {
                System.out.println("topic=" + n);
            }
        }
    }

    private static String oneLine(Throwable t) {
        String m = t.getMessage() == null ? t.getClass().getName() : t.getMessage();
        List<String> parts = new ArrayList<>();
        for (String l : m.split("\\R")) {
            if (!l.isBlank()) {
                parts.add(l.trim());
            }
        }
        return String.join(" ", parts);
    }
}
