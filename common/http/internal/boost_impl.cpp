// The one translation unit that compiles Asio's and Beast's implementations
// (BOOST_ASIO_SEPARATE_COMPILATION / BOOST_BEAST_SEPARATE_COMPILATION are public definitions of
// apus_common), so no other file pays for them.
#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>
