# Source this file from a rankscope bundle (scripts/make-bundle.sh) to use its
# rankscope and Open MPI from wherever it was unpacked.
bundle_root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH="$bundle_root/usr/bin:$PATH"
# Open MPI and PMIx find their plugins and help files under these prefixes.
export OPAL_PREFIX="$bundle_root/usr"
export PMIX_INSTALL_PREFIX="$bundle_root/usr/lib/x86_64-linux-gnu/pmix2"
export PMIX_MCA_mca_base_component_path="$PMIX_INSTALL_PREFIX/lib/pmix"
export OMPI_MCA_mca_base_component_path="$bundle_root/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"
unset bundle_root
