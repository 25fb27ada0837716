# What `cmake --install` puts under the prefix besides the two binaries (their
# install() rules are beside their targets), and the Debian package CPack
# builds from it (tools/package). Layout and choices: docs/DEPLOY.md.

set(EPOCHFS_PACKAGING_DIR ${CMAKE_SOURCE_DIR}/tools/packaging)

# The Python user API (EPOCHFS_PYTHON_API); the instruments (tools/bench/python) are not installed.
foreach(module ${EPOCHFS_PYTHON_API})
  install(FILES ${CMAKE_SOURCE_DIR}/tools/python/epochfs/${module}.py
          DESTINATION ${EPOCHFS_INSTALL_PYTHONDIR}/epochfs)
endforeach()

# Man pages, compressed as Debian ships them (-n: no timestamp, reproducible).
set(man_pages)
foreach(page epochfs.1 epochctl.1)
  set(out ${CMAKE_BINARY_DIR}/man/${page}.gz)
  add_custom_command(OUTPUT ${out}
                     COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
                     COMMAND gzip -9n -c ${CMAKE_SOURCE_DIR}/docs/man/${page} > ${out}
                     DEPENDS ${CMAKE_SOURCE_DIR}/docs/man/${page}
                     COMMENT "Compressing man page ${page}")
  list(APPEND man_pages ${out})
endforeach()
add_custom_target(man-pages ALL DEPENDS ${man_pages})
install(FILES ${man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

# The systemd template unit (one instance per mounted dataset).
find_program(EPOCHFS_FUSERMOUNT3 fusermount3 PATHS /usr/bin /bin NO_CACHE)
if(NOT EPOCHFS_FUSERMOUNT3)
  set(EPOCHFS_FUSERMOUNT3 /usr/bin/fusermount3)
endif()
# Written at install time: ExecStart names the binary under the prefix given
# to `cmake --install --prefix P` (or /usr in the package).
install(CODE "
  set(FUSERMOUNT3 \"${EPOCHFS_FUSERMOUNT3}\")
  set(EPOCHFS_BIN \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/epochfs\")
  set(unit \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${EPOCHFS_INSTALL_SYSTEMDDIR}/epochfs@.service\")
  message(STATUS \"Installing: \${unit}\")
  configure_file(\"${EPOCHFS_PACKAGING_DIR}/epochfs@.service.in\" \"\${unit}\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${unit}\")
")

# The Slurm prolog, epilog and task prolog (docs/CLUSTER.md "Slurm: prolog and epilog"),
# with an example of their site configuration (/etc/epochfs/slurm.conf).
install(PROGRAMS ${EPOCHFS_PACKAGING_DIR}/slurm/prolog ${EPOCHFS_PACKAGING_DIR}/slurm/epilog
                 ${EPOCHFS_PACKAGING_DIR}/slurm/task-prolog ${EPOCHFS_PACKAGING_DIR}/slurm/epochfs_slurm.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/epochfs/slurm)
install(FILES ${EPOCHFS_PACKAGING_DIR}/slurm/epochfs-slurm.conf.example
        DESTINATION ${CMAKE_INSTALL_DATADIR}/epochfs/slurm)

# Docs: README, the reference, the deployment examples; copyright and the
# changelog where Debian keeps them.
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
        PATTERN man EXCLUDE)
install(FILES ${EPOCHFS_PACKAGING_DIR}/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
configure_file(${EPOCHFS_PACKAGING_DIR}/changelog.in ${CMAKE_BINARY_DIR}/packaging/changelog @ONLY)
set(changelog ${CMAKE_BINARY_DIR}/packaging/changelog.gz)
add_custom_command(OUTPUT ${changelog}
                   COMMAND gzip -9n -c ${CMAKE_BINARY_DIR}/packaging/changelog > ${changelog}
                   DEPENDS ${CMAKE_BINARY_DIR}/packaging/changelog)
add_custom_target(changelog ALL DEPENDS ${changelog})
install(FILES ${changelog} DESTINATION ${CMAKE_INSTALL_DOCDIR})

# --- the Debian package (tools/package runs cpack) ---------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME epochfs)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_CONTACT "epochfs maintainers <maintainers@epochfs.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "read-only FUSE cache that loads training datasets at memory speed")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "\
epochfs mounts a dataset directory (typically on a shared filesystem)
read-only and serves its files from a node-local cache (RAM and local
disk). The nodes of a job share their caches over UCX, and a
shuffle-aware prefetcher fetches ahead of the loader. Includes the
epochctl admin tool and the Python API (import epochfs.torch).")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# fuse3: fusermount3 and mount.fuse3 (mount -t fuse.epochfs, fstab).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "fuse3, python3, python3-numpy")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3-torch")
configure_file(${EPOCHFS_PACKAGING_DIR}/prerm.in ${CMAKE_BINARY_DIR}/packaging/prerm @ONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/packaging/prerm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
