package org.mstar.jobs;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;
import picocli.CommandLine.IVersionProvider;

/** {@code mstar -V}: the project version the build wrote into {@code mstar-version.properties}. */
public final class MstarVersion implements IVersionProvider {
    static final String RESOURCE = "mstar-version.properties";

    @Override
    public String[] getVersion() throws IOException {
        Properties p = new Properties();
        try (InputStream in = MstarVersion.class.getClassLoader().getResourceAsStream(RESOURCE)) {
            if (in == null) {
                throw new IOException(RESOURCE + " is not on the class path");
            }
            p.load(in);
        }
        return new String[] {"mstar " + p.getProperty("version")};
    }
}
