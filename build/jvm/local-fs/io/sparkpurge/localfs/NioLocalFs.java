package io.sparkpurge.localfs;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * {@link NioLocalFileSystem} for Hadoop's {@code FileContext} API (which Delta's log store and
 * Spark's streaming checkpoint use): what {@code org.apache.hadoop.fs.local.RawLocalFs} is to
 * {@code RawLocalFileSystem}, with the same answers to the methods that class overrides.
 */
public class NioLocalFs extends DelegateToFileSystem {
  public NioLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
    super(uri, new NioLocalFileSystem(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
  }

  @Override
  public int getUriDefaultPort() {
    return -1;
  }

  @Override
  public FsServerDefaults getServerDefaults(Path f) throws IOException {
    return LocalConfigKeys.getServerDefaults();
  }

  @Override
  @Deprecated
  public FsServerDefaults getServerDefaults() throws IOException {
    return LocalConfigKeys.getServerDefaults();
  }

  @Override
  public boolean isValidName(String src) {
    return true;
  }

  @Override
  public String toString() {
    return "NioLocalFs";
  }
}
