// Stop 90 prototype (bench/diag/nio_local_fs/README.md): measured, not used by the package.
package sparkpurge;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/** Prototype: RawLocalFs over NioLocalFileSystem. */
public class NioLocalFs extends DelegateToFileSystem {
  public NioLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
    super(uri, new NioLocalFileSystem(), conf, "file", false);
  }

  @Override
  public int getUriDefaultPort() { return -1; }

  @Override
  public FsServerDefaults getServerDefaults(Path f) throws IOException { return LocalConfigKeys.getServerDefaults(); }

  @Override
  @Deprecated
  public FsServerDefaults getServerDefaults() throws IOException { return LocalConfigKeys.getServerDefaults(); }

  @Override
  public boolean isValidName(String src) { return true; }
}
